package control

// The format before version 1: its records read, to be rewritten in the current one.

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/quotashare/quotashare"
)

// v0Fields is what a version-0 record holds that the root types no longer read: its
// links, ARNs under the Go field names the root types had then, and a RUNNABLE job's
// code (the only one version 0 kept).
type v0Fields struct{ QueueARN, PolicyARN, EnvironmentARN, WaitCode string }

// nameOf is the name at the end of an ARN.
func nameOf(arn string) string {
	if i := strings.LastIndexByte(arn, '/'); i >= 0 {
		return arn[i+1:]
	}
	return arn
}

// decodeV0 reads a record of the format before version 1: the root types marshalled as
// they were, keyed and linked by ARN. The links are taken by the names in those ARNs.
func (st *State) decodeV0(r quotashare.Record) (*quotashare.QuotaShare, *quotashare.Job, error) {
	var old v0Fields
	if err := json.Unmarshal(r.Body, &old); err != nil {
		return nil, nil, err
	}
	switch r.Kind {
	case kindPolicy:
		p := &quotashare.SchedulingPolicy{}
		if err := json.Unmarshal(r.Body, p); err != nil {
			return nil, nil, err
		}
		st.policies[p.Name] = p
	case kindEnv:
		v := &quotashare.Environment{}
		if err := json.Unmarshal(r.Body, v); err != nil {
			return nil, nil, err
		}
		st.envs[v.Name] = v
	case kindQueue:
		q := &quotashare.Queue{}
		if err := json.Unmarshal(r.Body, q); err != nil {
			return nil, nil, err
		}
		q.Policy, q.Environment = nameOf(old.PolicyARN), nameOf(old.EnvironmentARN)
		st.queues[q.Name] = newQueueState(q)
	case kindShare:
		s := &quotashare.QuotaShare{}
		if err := json.Unmarshal(r.Body, s); err != nil {
			return nil, nil, err
		}
		s.Queue = nameOf(old.QueueARN)
		return s, nil, nil
	case kindJob:
		j := &quotashare.Job{}
		if err := json.Unmarshal(r.Body, j); err != nil {
			return nil, nil, err
		}
		j.Queue = st.intern(nameOf(old.QueueARN))
		// The other jobs' code follows from their state, and their detail is their
		// statusReason.
		j.ReasonCode, j.ReasonDetail = v0Code(j, old.WaitCode), j.StatusReason
		return nil, j, nil
	default:
		return nil, nil, fmt.Errorf("unknown kind")
	}
	return nil, nil, nil
}

// v0Code is the reason code of a job stored by version 0, which kept only a waiting
// job's.
func v0Code(j *quotashare.Job, waitCode string) quotashare.ReasonCode {
	switch {
	case j.Status == quotashare.Succeeded:
		return quotashare.ReasonCompleted
	case j.Status == quotashare.Failed && j.IsTerminated:
		return quotashare.ReasonTerminated
	case j.Status == quotashare.Failed:
		return quotashare.ReasonAttemptFailed
	case j.Current != nil && j.Current.Stop == quotashare.StopPreempted:
		return quotashare.ReasonPreempting
	case j.Current != nil && j.Current.Stop == quotashare.StopTerminated:
		return quotashare.ReasonTerminating
	case j.Current != nil && len(j.Current.Borrowed) > 0:
		return quotashare.ReasonBorrowing
	case j.Current != nil:
		return quotashare.ReasonOwnCapacity
	}
	return quotashare.ReasonCode(waitCode)
}
