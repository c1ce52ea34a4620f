package dispatch

import (
	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/control"
	"github.com/quotashare/quotashare/internal/sched"
)

// The commands and queries of control.State, each run under the engine's lock at the
// engine's time. A command that changes the state returns once the change is durable.

// Submit accepts a job (see control.State.Submit). The request is checked, its payload
// parsed and the executor asked whether it can run it before the lock is taken.
func (e *Engine) Submit(in control.JobInput) (quotashare.Job, error) {
	checked, err := control.CheckJob(in)
	if err != nil {
		return quotashare.Job{}, err
	}
	e.mu.Lock()
	x := e.exec // set by Run, under the lock
	e.mu.Unlock()
	if x != nil {
		check := func() error { return x.Check(checked.Request) }
		if sc, ok := x.(quotashare.ShareChecker); ok {
			check = func() error { return sc.CheckShare(checked.Request, in.Queue, in.Share) }
		}
		if err := check(); err != nil {
			return quotashare.Job{}, quotashare.Errorf(quotashare.Invalid, "%w", err)
		}
	}
	var out quotashare.Job
	err = e.run(func(s *control.State) (err error) {
		if out, err = s.Submit(in, checked); err == nil {
			if e.parsed == nil {
				e.parsed = map[string]*quotashare.TrainingRequest{}
			}
			e.parsed[out.ID] = checked.Request // for its start in the next cycle, if it starts
		}
		return err
	})
	return out, err
}

// Job: see control.State.Job.
func (e *Engine) Job(id string) (quotashare.Job, error) {
	var r0 quotashare.Job
	err := e.read(func(s *control.State) (err error) {
		r0, err = s.Job(id)
		return err
	})
	return r0, err
}

// SetPriority: see control.State.SetPriority.
func (e *Engine) SetPriority(id string, priority int) (quotashare.Job, error) {
	var r0 quotashare.Job
	err := e.run(func(s *control.State) (err error) {
		r0, err = s.SetPriority(id, priority)
		return err
	})
	return r0, err
}

// Terminate: see control.State.Terminate.
func (e *Engine) Terminate(id string, reason string) error {
	return e.run(func(s *control.State) error { return s.Terminate(id, reason) })
}

// ListJobs: see control.State.ListJobs.
func (e *Engine) ListJobs(f control.ListFilter, from int64, max int) ([]quotashare.Job, int64, error) {
	var r0 []quotashare.Job
	var r1 int64
	err := e.read(func(s *control.State) (err error) {
		r0, r1, err = s.ListJobs(f, from, max)
		return err
	})
	return r0, r1, err
}

// Snapshot: see control.State.Snapshot.
func (e *Engine) Snapshot(queue string) (control.Snapshot, error) {
	var r0 control.Snapshot
	err := e.read(func(s *control.State) (err error) {
		r0, err = s.Snapshot(queue)
		return err
	})
	return r0, err
}

// Usage: see control.State.Usage.
func (e *Engine) Usage(queue string) ([]sched.ShareUsage, error) {
	var r0 []sched.ShareUsage
	err := e.read(func(s *control.State) (err error) {
		r0, err = s.Usage(queue)
		return err
	})
	return r0, err
}

// Tags: see control.State.Tags.
func (e *Engine) Tags(r control.Resource) (map[string]string, error) {
	var r0 map[string]string
	err := e.read(func(s *control.State) (err error) {
		r0, err = s.Tags(r)
		return err
	})
	return r0, err
}

// Tag: see control.State.Tag.
func (e *Engine) Tag(r control.Resource, tags map[string]string) error {
	return e.run(func(s *control.State) error { return s.Tag(r, tags) })
}

// Untag: see control.State.Untag.
func (e *Engine) Untag(r control.Resource, keys []string) error {
	return e.run(func(s *control.State) error { return s.Untag(r, keys) })
}

// CreatePolicy: see control.State.CreatePolicy.
func (e *Engine) CreatePolicy(in control.PolicyInput) (quotashare.SchedulingPolicy, error) {
	var r0 quotashare.SchedulingPolicy
	err := e.run(func(s *control.State) (err error) {
		r0, err = s.CreatePolicy(in)
		return err
	})
	return r0, err
}

// UpdatePolicy: see control.State.UpdatePolicy.
func (e *Engine) UpdatePolicy(name string, quota bool, fair bool, idle string) error {
	return e.run(func(s *control.State) error { return s.UpdatePolicy(name, quota, fair, idle) })
}

// DescribePolicies: see control.State.DescribePolicies.
func (e *Engine) DescribePolicies(names []string) []quotashare.SchedulingPolicy {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.st.DescribePolicies(names)
}

// PolicyNames: see control.State.PolicyNames.
func (e *Engine) PolicyNames() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.st.PolicyNames()
}

// DeletePolicy: see control.State.DeletePolicy.
func (e *Engine) DeletePolicy(name string) error {
	return e.run(func(s *control.State) error { return s.DeletePolicy(name) })
}

// CreateEnvironment: see control.State.CreateEnvironment.
func (e *Engine) CreateEnvironment(in control.EnvironmentInput) (quotashare.Environment, error) {
	var r0 quotashare.Environment
	err := e.run(func(s *control.State) (err error) {
		r0, err = s.CreateEnvironment(in)
		return err
	})
	return r0, err
}

// UpdateEnvironment: see control.State.UpdateEnvironment.
func (e *Engine) UpdateEnvironment(name string, disabled *bool, limits []quotashare.Demand) (quotashare.Environment, error) {
	var r0 quotashare.Environment
	err := e.run(func(s *control.State) (err error) {
		r0, err = s.UpdateEnvironment(name, disabled, limits)
		return err
	})
	return r0, err
}

// DescribeEnvironments: see control.State.DescribeEnvironments.
func (e *Engine) DescribeEnvironments(names []string) ([]quotashare.Environment, error) {
	var r0 []quotashare.Environment
	err := e.read(func(s *control.State) error {
		r0 = s.DescribeEnvironments(names)
		return nil
	})
	return r0, err
}

// DeleteEnvironment: see control.State.DeleteEnvironment.
func (e *Engine) DeleteEnvironment(name string) error {
	return e.run(func(s *control.State) error { return s.DeleteEnvironment(name) })
}

// CreateQueue: see control.State.CreateQueue.
func (e *Engine) CreateQueue(in control.QueueInput) (quotashare.Queue, error) {
	var r0 quotashare.Queue
	err := e.run(func(s *control.State) (err error) {
		r0, err = s.CreateQueue(in)
		return err
	})
	return r0, err
}

// UpdateQueue: see control.State.UpdateQueue.
func (e *Engine) UpdateQueue(name string, in control.QueueInput) (quotashare.Queue, error) {
	var r0 quotashare.Queue
	err := e.run(func(s *control.State) (err error) {
		r0, err = s.UpdateQueue(name, in)
		return err
	})
	return r0, err
}

// DescribeQueues: see control.State.DescribeQueues.
func (e *Engine) DescribeQueues(names []string) ([]quotashare.Queue, error) {
	var r0 []quotashare.Queue
	err := e.read(func(s *control.State) error {
		r0 = s.DescribeQueues(names)
		return nil
	})
	return r0, err
}

// DeleteQueue: see control.State.DeleteQueue.
func (e *Engine) DeleteQueue(name string) error {
	return e.run(func(s *control.State) error { return s.DeleteQueue(name) })
}

// CreateShare: see control.State.CreateShare.
func (e *Engine) CreateShare(in control.ShareInput) (quotashare.QuotaShare, error) {
	var r0 quotashare.QuotaShare
	err := e.run(func(s *control.State) (err error) {
		r0, err = s.CreateShare(in)
		return err
	})
	return r0, err
}

// UpdateShare: see control.State.UpdateShare.
func (e *Engine) UpdateShare(r control.ShareRef, in control.ShareInput) (quotashare.QuotaShare, error) {
	var r0 quotashare.QuotaShare
	err := e.run(func(s *control.State) (err error) {
		r0, err = s.UpdateShare(r, in)
		return err
	})
	return r0, err
}

// DescribeShare: see control.State.DescribeShare.
func (e *Engine) DescribeShare(r control.ShareRef) (quotashare.QuotaShare, error) {
	var r0 quotashare.QuotaShare
	err := e.read(func(s *control.State) (err error) {
		r0, err = s.DescribeShare(r)
		return err
	})
	return r0, err
}

// ListShares: see control.State.ListShares.
func (e *Engine) ListShares(queue string) ([]quotashare.QuotaShare, error) {
	var r0 []quotashare.QuotaShare
	err := e.read(func(s *control.State) (err error) {
		r0, err = s.ListShares(queue)
		return err
	})
	return r0, err
}

// DeleteShare: see control.State.DeleteShare.
func (e *Engine) DeleteShare(r control.ShareRef) error {
	return e.run(func(s *control.State) error { return s.DeleteShare(r) })
}

// Preview: see control.State.Preview.
func (e *Engine) Preview(queue string, changes []control.PreviewChange) (control.Preview, error) {
	var r0 control.Preview
	err := e.read(func(s *control.State) (err error) {
		r0, err = s.Preview(queue, changes)
		return err
	})
	return r0, err
}
