package control

// Load and rebuild: a State made from the store's records, and a queue's scheduler
// rebuilt from its jobs.

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/sched"
	"github.com/quotashare/quotashare/internal/trainingjob"
)

// Load makes a State from the records load gives (a Store's Load, ordered by kind then
// key) and rebuilds every queue's scheduler.
func Load(cfg Config, load func(fn func(quotashare.Record) error) error) (*State, error) {
	return LoadDecoded(cfg, func(fn func(Loaded) error) error {
		return load(func(r quotashare.Record) error { return fn(Loaded{Record: r}) })
	})
}

// LoadDecoded is Load from records that may have been through Predecode already: the
// runner decodes them on several cores while the store reads on, and the state, which is
// not safe for concurrent use, takes them in order.
func LoadDecoded(cfg Config, load func(fn func(Loaded) error) error) (*State, error) {
	if cfg.Tick <= 0 {
		cfg.Tick = time.Second
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.CapacityBackoff <= 0 {
		cfg.CapacityBackoff = time.Second
	}
	if cfg.GPUsPerInstance == nil {
		cfg.GPUsPerInstance = func(t string) int { return trainingjob.GPUsPer(nil, t) }
	}
	if cfg.SweepBatch <= 0 {
		cfg.SweepBatch = 1000
	}
	if cfg.CapacityBackoffMax < cfg.CapacityBackoff {
		cfg.CapacityBackoffMax = max(cfg.CapacityBackoff, 2*time.Minute)
	}
	st := &State{cfg: cfg, policies: map[string]*quotashare.SchedulingPolicy{}, envs: map[string]*quotashare.Environment{},
		queues: map[string]*queueState{}, jobs: map[string]*quotashare.Job{}, tokens: map[string]string{}, dirty: map[recKey]bool{},
		budget: -1, counters: newCounters(), reclaimAt: map[string]time.Time{}, strings: map[string]string{}, needs: map[quotashare.Demand][]quotashare.Demand{}}
	// A preemption's reason names the job it makes room for by name, then id.
	st.cfg.Sched.JobText = func(id string) string {
		if j := st.jobs[id]; j != nil {
			return j.Name + " (" + id + ")"
		}
		return id
	}
	if err := st.load(load); err != nil {
		return nil, err
	}
	return st, nil
}

// KeepClock carries a previous State's clock and counters over to one loaded in its
// place, so that times stay strictly increasing and counters counting across a reload.
func (st *State) KeepClock(old *State) {
	st.counters, st.passes = old.counters, old.passes
	if old.lastNow.After(st.lastNow) {
		st.lastNow = old.lastNow
	}
	st.clock = old.clock
}

// load reads the whole state from the records load gives into the empty maps.
func (st *State) load(load func(fn func(Loaded) error) error) error {
	var shares []*quotashare.QuotaShare
	var jobs []*quotashare.Job
	// The _format record sorts before every other kind: the version is known before the
	// first object. A store with objects and no _format record is of version 0.
	version, first := 0, true
	err := load(func(l Loaded) error {
		r := l.Record
		if first {
			first = false
			if r.Kind == kindFormat {
				var f storedFormat
				if err := json.Unmarshal(r.Body, &f); err != nil {
					return fmt.Errorf("the stored format record: %w", err)
				}
				if f.Version > formatVersion {
					return fmt.Errorf("the store is of format version %d, newer than this quotashare knows (%d): upgrade quotashare", f.Version, formatVersion)
				}
				version = f.Version
				st.launches = f.Launches
				if f.JobKeysByTimeSince != nil {
					st.jobKeysSince = *f.JobKeysByTimeSince
				}
				return nil
			}
		}
		if version == 0 && r.Kind != kindJob {
			st.oldKeys = append(st.oldKeys, recKey{kind: r.Kind, key: r.Key}) // ARNs, rewritten by upgrade
		}
		s, j, err := st.decode(version, l)
		if err != nil {
			return fmt.Errorf("%s %s: %w", r.Kind, r.Key, err)
		}
		if s != nil {
			shares = append(shares, s)
		}
		if j != nil {
			jobs = append(jobs, j)
		}
		return nil
	})
	if err != nil {
		return err
	}
	st.version = version
	if first {
		st.version = -1 // empty: upgrade writes the format record
	}
	for _, s := range shares {
		qs := st.queues[s.Queue]
		if qs == nil {
			return fmt.Errorf("share %s: its queue %s is missing", shareKey(s), s.Queue)
		}
		qs.shares[s.Name] = s
	}
	slices.SortFunc(jobs, bySubmission)
	var finished []*quotashare.Job
	for _, j := range jobs {
		qs := st.queues[j.Queue]
		if qs == nil {
			return fmt.Errorf("job %s: its queue %s is missing", j.ID, j.Queue)
		}
		j.Queue = qs.q.Name // one string for every job of the queue
		st.jobs[j.ID] = j
		if j.ClientToken != "" {
			st.tokens[j.ClientToken] = j.ID
		}
		qs.jobs.add(j)
		qs.index.add(j)
		if j.Current != nil {
			qs.active[j] = true
		}
		if j.Status.Done() {
			finished = append(finished, j)
		} else {
			qs.live[j.Share]++
		}
		if j.Status == quotashare.Runnable {
			qs.fresh = append(qs.fresh, j) // its stored reason may be stale
		}
		if j.CreatedAt.After(st.lastNow) {
			st.lastNow = j.CreatedAt
		}
	}
	slices.SortStableFunc(finished, func(a, b *quotashare.Job) int { return finishedAt(a).Compare(finishedAt(b)) })
	st.finished = finishedList{jobs: finished}
	if st.version == 0 || st.version == 1 {
		// Their jobs are keyed by id; the jobs created from the upgrade on, by time.
		st.jobKeysSince = st.lastNow.Add(time.Nanosecond)
	}
	for _, qs := range st.queues {
		var err error
		if qs.sched, err = st.rebuild(qs); err != nil {
			return err
		}
		qs.dirty = true
	}
	return nil
}

// rebuild makes a scheduler for the queue from its environment, shares and unfinished
// jobs as they are in memory: what a restart does from the store, and what Preview does
// to try changes on a copy.
func (st *State) rebuild(qs *queueState) (*sched.Scheduler, error) {
	s := sched.New(st.cfg.Sched)
	if env := st.envs[qs.q.Environment]; env != nil {
		if err := s.SetCapacity(env.Limits); err != nil {
			return nil, fmt.Errorf("environment %s: %w", env.Name, err)
		}
		if qs.fifo() {
			if err := s.SetShare(fifoShareOf(env)); err != nil {
				return nil, fmt.Errorf("FIFO queue %s: %w", qs.q.Name, err)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(qs.shares)) {
		sh := qs.shares[name]
		if err := s.SetShare(schedShare(sh)); err != nil {
			return nil, fmt.Errorf("share %s: %w", shareKey(sh), err)
		}
	}
	// Waiting jobs first, so that a stopping attempt finds the job its capacity is for.
	for pass := 0; pass < 2; pass++ {
		var err error
		qs.jobs.each(func(j *quotashare.Job) bool {
			if j.Status.Done() || (pass == 0) != (j.Current == nil) {
				return true
			}
			if j.Current == nil {
				err = s.Submit(qs.schedJob(j))
				if err == nil && !j.HeldUntil.IsZero() {
					err = s.Hold(j.ID, j.HeldUntil, j.HeldFor, j.CapacityRefusals)
				}
			} else {
				err = s.RestoreActive(qs.schedJob(j), sched.Active{StartedAt: j.Current.StartedAt,
					Stopping: j.Current.Stop != "", StoppingFor: j.Current.StopFor})
			}
			if err != nil {
				err = fmt.Errorf("job %s: %w", j.ID, err)
				return false
			}
			return true
		})
		if err != nil {
			return nil, err
		}
	}
	return s, nil
}

func schedShare(s *quotashare.QuotaShare) sched.Share {
	return sched.Share{Name: s.Name, Limits: s.Limits, Strategy: s.Strategy, BorrowLimit: s.BorrowLimit,
		InSharePreemption: s.InSharePreemption, Disabled: s.Disabled,
		MinRunTime: s.MinRunTime, MinRunTimeAgainstReclaim: s.MinRunTimeAgainstReclaim}
}

// schedJob is a job as the queue's core sees it (in a FIFO queue: in the one share, its
// need counted in instances).
func (qs *queueState) schedJob(j *quotashare.Job) sched.Job {
	sj := sched.Job{ID: j.ID, Share: j.Share, Priority: j.Priority, Need: j.Need, SubmittedAt: j.CreatedAt, RunnableSince: j.RunnableSince}
	if qs.fifo() {
		sj.Share, sj.Need = fifoShare, fifoNeed(j.Need)
	}
	return sj
}
