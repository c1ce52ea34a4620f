package control

// Tags: on every kind of resource.

import (
	"maps"
	"time"

	"github.com/quotashare/quotashare"
)

// ResourceKind is the kind of object a Resource names.
type ResourceKind int

// The kinds of objects that carry tags.
const (
	PolicyResource ResourceKind = iota + 1
	EnvironmentResource
	QueueResource
	ShareResource
	JobResource
)

// Resource names an object that carries tags: a policy, environment or queue by Name, a
// share by Queue and Name, a job by its id in Name.
type Resource struct {
	Kind        ResourceKind
	Queue, Name string
}

// tagsOf finds the tag map of the resource, and marks it to be written.
func (st *State) tagsOf(r Resource) (*map[string]string, func(), error) {
	switch r.Kind {
	case PolicyResource:
		if p := st.policies[r.Name]; p != nil {
			return &p.Tags, func() { st.touch(kindPolicy, r.Name) }, nil
		}
	case EnvironmentResource:
		if v := st.envs[r.Name]; v != nil {
			return &v.Tags, func() { st.touch(kindEnv, r.Name) }, nil
		}
	case QueueResource:
		if qs := st.queues[r.Name]; qs != nil {
			return &qs.q.Tags, func() { st.touch(kindQueue, r.Name) }, nil
		}
	case ShareResource:
		if s := st.share(ShareRef{r.Queue, r.Name}); s != nil {
			return &s.Tags, func() { st.touch(kindShare, shareKey(s)) }, nil
		}
	case JobResource:
		if j := st.jobs[r.Name]; j != nil {
			return &j.Tags, func() { st.touchJob(j) }, nil
		}
	}
	return nil, nil, quotashare.Errorf(quotashare.NotFound, "resourceArn: no such scheduling policy, service environment, job queue, quota share or service job")
}

// Tags returns a resource's tags.
func (st *State) Tags(r Resource) (map[string]string, error) {
	t, _, err := st.tagsOf(r)
	if err != nil {
		return nil, err
	}
	return maps.Clone(*t), nil
}

// Tag adds or replaces tags on a resource.
func (st *State) Tag(r Resource, tags map[string]string) error {
	if len(tags) == 0 {
		return invalid("tags: give 1 to 50 tags")
	}
	if err := CheckTags("tags", tags); err != nil {
		return err
	}
	return st.write(func(time.Time) error {
		t, touch, err := st.tagsOf(r)
		if err != nil {
			return err
		}
		merged := maps.Clone(*t)
		if merged == nil {
			merged = map[string]string{}
		}
		maps.Copy(merged, tags)
		if err := CheckTags("tags", merged); err != nil {
			return err
		}
		*t = merged
		touch()
		return nil
	})
}

// Untag removes tags from a resource.
func (st *State) Untag(r Resource, keys []string) error {
	if len(keys) == 0 || len(keys) > 50 {
		return invalid("tagKeys: give 1 to 50 keys, got %d", len(keys))
	}
	return st.write(func(time.Time) error {
		t, touch, err := st.tagsOf(r)
		if err != nil {
			return err
		}
		m := maps.Clone(*t)
		for _, k := range keys {
			delete(m, k)
		}
		*t = m
		touch()
		return nil
	})
}
