package schedtest

import (
	"fmt"
	"sort"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/sched"
	"github.com/quotashare/quotashare/internal/sim"
)

// Checked is a sim.Core that passes every event to a scheduler and mirrors it into a
// Ledger, which checks SPEC's invariants on every plan. A scenario script run through it
// checks the invariants as well as its transcript.
type Checked struct {
	sim.Core
	Ledger *Ledger
	// Errs are the invariant failures found so far, each with the plan's time.
	Errs []error
	ages AgeWaits
	// reshared: a share changed since the last plan (SetShare has no time; the next
	// plan's is used, which only shortens the wait counted).
	reshared bool
}

var _ sim.Core = (*Checked)(nil)

// NewChecked wraps c. mayHold is Ledger.MayHold: the scheduler may leave a startable job
// waiting (a head-of-line timeout or a shallow backfill depth).
func NewChecked(c sim.Core, mayHold bool) *Checked {
	l := NewLedger()
	l.MayHold = mayHold
	return &Checked{Core: c, Ledger: l}
}

func (c *Checked) SetCapacity(limits []quotashare.Demand) error {
	err := c.Core.SetCapacity(limits)
	if err == nil {
		clear(c.Ledger.Capacity)
		for _, d := range limits {
			c.Ledger.Capacity[d.InstanceType] = d.Count
		}
	}
	return err
}

func (c *Checked) SetShare(cfg sched.Share) error {
	err := c.Core.SetShare(cfg)
	if err == nil {
		c.Ledger.Shares[cfg.Name] = cfg
		c.reshared = true
	}
	return err
}

func (c *Checked) RemoveShare(name string) error {
	err := c.Core.RemoveShare(name)
	if err == nil {
		delete(c.Ledger.Shares, name)
	}
	return err
}

func (c *Checked) Submit(j sched.Job) error {
	if c.Ledger.Overtakes(j.Share, j.Priority) {
		c.reshared = true
	}
	err := c.Core.Submit(j)
	if err == nil {
		c.Ledger.Jobs[j.ID] = &LedgerJob{ID: j.ID, Share: j.Share, Priority: j.Priority, Need: j.Need, State: "queued"}
	}
	return err
}

func (c *Checked) SetPriority(id string, p int) error {
	err := c.Core.SetPriority(id, p)
	if j := c.Ledger.Jobs[id]; err == nil && j != nil {
		j.Priority = p
		c.reshared = true
	}
	return err
}

func (c *Checked) Running(id string, at time.Time) error {
	err := c.Core.Running(id, at)
	if j := c.Ledger.Jobs[id]; err == nil && j != nil && j.State != "queued" {
		j.Started = at
	}
	return err
}

func (c *Checked) Remove(id string) error {
	err := c.Core.Remove(id)
	if err == nil {
		delete(c.Ledger.Jobs, id)
	}
	return err
}

func (c *Checked) Stopping(id string) error {
	err := c.Core.Stopping(id)
	if j := c.Ledger.Jobs[id]; err == nil && j != nil {
		j.State = "stopping"
	}
	return err
}

func (c *Checked) Stopped(id string, requeue bool, now time.Time) error {
	err := c.Core.Stopped(id, requeue, now)
	if j := c.Ledger.Jobs[id]; err == nil && j != nil {
		if requeue {
			j.State = "queued"
		} else {
			delete(c.Ledger.Jobs, id)
		}
	}
	return err
}

func (c *Checked) Plan(now time.Time) sched.Plan {
	if c.reshared {
		c.ages.ShareChanged(now)
		c.reshared = false
	}
	p := c.Core.Plan(now)
	c.Ledger.Now = now
	for _, err := range c.Ledger.Apply(p) {
		c.Errs = append(c.Errs, fmt.Errorf("plan at=%d: %w", now.Unix(), err))
	}
	var queued []string
	for id, j := range c.Ledger.Jobs {
		if j.State == "queued" {
			queued = append(queued, id)
		}
	}
	sort.Strings(queued)
	if err := c.ages.Check(now, queued, c.Core.Reason, c.Ledger.Shares); err != nil {
		c.Errs = append(c.Errs, fmt.Errorf("plan at=%d: %w", now.Unix(), err))
	}
	return p
}

// AgeWaits checks that no job waits for attempts to come of age longer than the longest
// minimum run time of any share (README, a lender's claim): the attempts it waited for when
// it began were enough, and they have all come of age by then. A change of a share's
// configuration may make it wait longer, so the count starts again at the last one.
type AgeWaits struct {
	since       map[string]time.Time // per job waiting for attempts to come of age: since when
	shareChange time.Time
}

// ShareChanged records, at now, a change that may give the attempts a job waits for to
// another job, or keep them running longer: a share's configuration, a priority, or a
// job of higher priority than a waiting one submitted to its share (priority order may
// delay a lower-priority job for ever; the bound holds between such changes).
func (a *AgeWaits) ShareChanged(now time.Time) { a.shareChange = now }

// Overtakes reports whether a job of priority prio submitted to share comes before some
// job of that share that waits (ShareChanged).
func (l *Ledger) Overtakes(share string, prio int) bool {
	for _, j := range l.Jobs {
		if j.Share == share && j.State == "queued" && j.Priority < prio {
			return true
		}
	}
	return false
}

// Check looks, after the plan at now, at the reasons of the waiting jobs queued (ids,
// sorted), given by reason, with shares' configurations.
func (a *AgeWaits) Check(now time.Time, queued []string, reason func(id string) (sched.Reason, bool), shares map[string]sched.Share) error {
	var longest time.Duration
	for _, sh := range shares {
		longest = max(longest, sh.MinRunTime)
	}
	waiting := map[string]time.Time{}
	var err error
	for _, id := range queued {
		r, ok := reason(id)
		if !ok || r.Code != quotashare.ReasonWaitingForMinRunTime {
			continue
		}
		since, ok := a.since[id]
		if !ok {
			since = now
		}
		waiting[id] = since
		from := since
		if a.shareChange.After(from) {
			from = a.shareChange
		}
		if now.Sub(from) > longest && err == nil {
			err = fmt.Errorf("%s has waited for attempts to come of age since %d, longer than the longest minimum run time %v",
				id, since.Unix(), longest)
		}
	}
	a.since = waiting
	return err
}
