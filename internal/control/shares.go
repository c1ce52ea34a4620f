package control

import (
	"maps"
	"slices"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/sched"
)

// ---- quota shares ----

// ShareInput is CreateQuotaShare's request, and UpdateQuotaShare's where nil and ""
// keep the current value.
type ShareInput struct {
	Name, Queue       string
	Limits            []quotashare.Demand
	Strategy          quotashare.Strategy
	BorrowLimit       *int
	InSharePreemption *bool
	// MinRunTime, if not nil, sets quotashare's minimum run time before preemption.
	MinRunTime *MinRunTime
	// Disabled: the share's state (nil: ENABLED at create, unchanged at update).
	Disabled *bool
	Tags     map[string]string
}

// MinRunTime is quotashare's minimum run time before preemption, as a request sets it.
type MinRunTime struct {
	Seconds        int
	AgainstReclaim bool
}

func checkShareLimits(limits []quotashare.Demand) error {
	for i, d := range limits {
		if d.Count < 1 {
			return invalid("capacityLimits[%d].maxCapacity: %d must be at least 1", i, d.Count)
		}
	}
	return nil
}

// shareConfig merges an update into a share's configuration and validates the result:
// the rules the scheduler relies on (the share's name, strategy, borrow limit, limits)
// are sched.CheckShare's, stated there once; this adds the request's own.
func shareConfig(cur quotashare.QuotaShare, in ShareInput, creating bool) (quotashare.QuotaShare, error) {
	if in.Limits != nil {
		if err := checkShareLimits(in.Limits); err != nil {
			return cur, err
		}
		cur.Limits = slices.Clone(in.Limits)
	}
	if in.Strategy != "" {
		cur.Strategy = in.Strategy
		if !in.Strategy.Borrows() && in.BorrowLimit == nil {
			cur.BorrowLimit = quotashare.UnlimitedBorrow
		}
	}
	if in.BorrowLimit != nil {
		if cur.Strategy != quotashare.LendAndBorrow {
			return cur, invalid("resourceSharingConfiguration.borrowLimit: applies only to strategy LEND_AND_BORROW, not %s; leave it out", cur.Strategy)
		}
		cur.BorrowLimit = *in.BorrowLimit
	} else if creating {
		cur.BorrowLimit = quotashare.UnlimitedBorrow
	}
	cur.InSharePreemption = given(in.InSharePreemption, cur.InSharePreemption)
	if m := in.MinRunTime; m != nil {
		if m.Seconds < 0 || time.Duration(m.Seconds) > sched.MaxMinRunTime/time.Second {
			return cur, invalid("quotashareMinRunTime.seconds: %d must be from 0 to %d", m.Seconds, int(sched.MaxMinRunTime/time.Second))
		}
		cur.MinRunTime, cur.MinRunTimeAgainstReclaim = time.Duration(m.Seconds)*time.Second, m.AgainstReclaim
	}
	cur.Disabled = given(in.Disabled, cur.Disabled)
	if err := sched.CheckShare(schedShare(&cur)); err != nil {
		return cur, invalid("%w", err)
	}
	return cur, nil
}

// ShareRef names a quota share: its queue's name and its own.
type ShareRef struct{ Queue, Name string }

func (r ShareRef) String() string { return r.Queue + "/" + r.Name }

// shareKey is a share's key in records: its queue's name and its own, joined by a slash.
func shareKey(s *quotashare.QuotaShare) string { return ShareRef{s.Queue, s.Name}.String() }

// share finds a share.
func (st *State) share(r ShareRef) *quotashare.QuotaShare {
	if qs := st.queues[r.Queue]; qs != nil {
		return qs.shares[r.Name]
	}
	return nil
}

// shareNotFound is the error for a share that does not exist.
func shareNotFound(r ShareRef) error {
	return quotashare.Errorf(quotashare.NotFound, "quotaShareArn: quota share %s of job queue %s does not exist", r.Name, r.Queue)
}

// CreateShare creates a quota share.
func (st *State) CreateShare(in ShareInput) (out quotashare.QuotaShare, err error) {
	if in.Strategy == "" {
		return out, invalid("resourceSharingConfiguration.strategy: is required (RESERVE, LEND or LEND_AND_BORROW)")
	}
	if in.InSharePreemption == nil {
		return out, invalid("preemptionConfiguration.inSharePreemption: is required")
	}
	if err := CheckTags("tags", in.Tags); err != nil {
		return out, err
	}
	cfg, err := shareConfig(quotashare.QuotaShare{Name: in.Name}, in, true)
	if err != nil {
		return out, err
	}
	if err := st.checkTypes(in.Limits); err != nil {
		return out, err
	}
	err = st.write(func(time.Time) error {
		qs := st.queues[in.Queue]
		if qs == nil {
			return invalid("jobQueue: %s does not exist", in.Queue)
		}
		if qs.fifo() {
			return invalid("jobQueue: %s is a FIFO queue (created without a scheduling policy): it has no quota shares", qs.q.Name)
		}
		if qs.shares[in.Name] != nil {
			return quotashare.Errorf(quotashare.Conflict, "Quota share %s already exists in job queue %s", in.Name, qs.q.Name)
		}
		if err := st.checkShareTypes(qs, cfg.Limits); err != nil {
			return err
		}
		cfg.Queue = in.Queue
		cfg.Tags = maps.Clone(in.Tags)
		if err := qs.sched.SetShare(schedShare(&cfg)); err != nil {
			return invalid("%w", err)
		}
		s := &cfg
		qs.shares[in.Name] = s
		qs.dirty = true
		st.touch(kindShare, shareKey(s))
		out = *s
		return nil
	})
	return out, err
}

// UpdateShare changes a share. A limit lowered below usage makes the excess borrowed:
// reclaimable when an owner needs it.
func (st *State) UpdateShare(r ShareRef, in ShareInput) (out quotashare.QuotaShare, err error) {
	err = st.write(func(time.Time) error {
		s := st.share(r)
		if s == nil {
			return shareNotFound(r)
		}
		if s.Deleting {
			return quotashare.Errorf(quotashare.Conflict, "quotaShareArn: quota share %s is being deleted", s.Name)
		}
		if err := st.checkTypes(in.Limits); err != nil {
			return err
		}
		cfg, err := shareConfig(*s, in, false)
		if err != nil {
			return err
		}
		qs := st.queues[s.Queue]
		if in.Limits != nil {
			if err := st.checkShareTypes(qs, in.Limits); err != nil {
				return err
			}
		}
		if err := qs.sched.SetShare(schedShare(&cfg)); err != nil {
			return invalid("%w", err)
		}
		*s = cfg
		qs.dirty = true
		qs.fresh = append(qs.fresh, st.runnable(qs)...)
		st.touch(kindShare, shareKey(s))
		out = *s
		out.Tags = maps.Clone(s.Tags)
		return nil
	})
	return out, err
}

// DescribeShare returns a share; a missing one is an error that says "does not exist".
func (st *State) DescribeShare(r ShareRef) (quotashare.QuotaShare, error) {
	s := st.share(r)
	if s == nil {
		return quotashare.QuotaShare{}, shareNotFound(r)
	}
	c := *s
	c.Tags = maps.Clone(s.Tags)
	return c, nil
}

// ListShares returns a queue's shares, sorted by name.
func (st *State) ListShares(queue string) ([]quotashare.QuotaShare, error) {
	qs, err := st.queueNamed(queue)
	if err != nil {
		return nil, err
	}
	var out []quotashare.QuotaShare
	for _, name := range slices.Sorted(maps.Keys(qs.shares)) {
		out = append(out, *qs.shares[name])
	}
	return out, nil
}

// DeleteShare deletes a DISABLED share: its waiting jobs fail at once, its running ones
// are stopped, and the share is gone when the last of them has stopped.
func (st *State) DeleteShare(r ShareRef) error {
	return st.write(func(now time.Time) error {
		s := st.share(r)
		if s == nil {
			return shareNotFound(r)
		}
		if !s.Disabled {
			return quotashare.Errorf(quotashare.Conflict, "quotaShareArn: quota share %s is ENABLED; set its state to DISABLED first", s.Name)
		}
		if s.Deleting {
			return nil
		}
		s.Deleting = true
		st.touch(kindShare, shareKey(s))
		qs := st.queues[s.Queue]
		// Its unfinished jobs, in submission order: those the scheduler holds, never the
		// queue's history.
		var ending []*quotashare.Job
		qs.sched.EachJob(func(id string) {
			if j := st.jobs[id]; j != nil && j.Share == s.Name && !j.Status.Done() {
				ending = append(ending, j)
			}
		})
		slices.SortFunc(ending, bySubmission)
		for _, j := range ending {
			st.terminate(qs, j, "Quota share "+s.Name+" was deleted", now)
		}
		if qs.live[s.Name] == 0 {
			st.dropShare(qs, s)
		}
		return nil
	})
}
