package schedtest

import (
	"fmt"
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
	p := c.Core.Plan(now)
	c.Ledger.Now = now
	for _, err := range c.Ledger.Apply(p) {
		c.Errs = append(c.Errs, fmt.Errorf("plan at=%d: %w", now.Unix(), err))
	}
	return p
}
