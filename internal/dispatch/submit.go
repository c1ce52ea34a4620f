package dispatch

import (
	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/control"
)

// Submit accepts a job (see control.State.Submit). It is the one command with a method of
// its own (every other goes through Update): the request is checked, its payload parsed
// and the executor asked whether it can run it before the lock is taken.
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
	err = e.Update(func(s *control.State) (err error) {
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
