package dispatch

// Acting: the executor calls of what was committed, in order, outside the lock.

import (
	"strings"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/control"
	"github.com/quotashare/quotashare/internal/trainingjob"
)

func (e *Engine) actLoop() {
	defer close(e.actDone)
	for batch := range e.actq {
		for _, a := range batch {
			// Checked before every call, not once a batch: a batch of launches on a
			// cluster can take seconds, and once deposed, another server may act.
			select {
			case <-e.gone: // this one calls the executor no more
				continue
			default:
			}
			a(e.exec)
		}
	}
}

// call turns an action of the state into the executor call. A Start the executor
// refuses comes back as the attempt's end: CannotStart.
func (e *Engine) call(a control.Action) func(quotashare.Executor) {
	if spec := a.Start; spec != nil {
		return func(x quotashare.Executor) {
			if spec.Request == nil {
				e.parse(spec)
			}
			if err := x.Start(*spec); err != nil {
				e.Report(quotashare.Report{JobID: spec.JobID, AttemptID: spec.AttemptID, State: quotashare.AttemptExited,
					At: e.cfg.Now(), Kind: quotashare.ExitCannotStart, Detail: err.Error()})
			}
		}
	}
	if ids := a.Forget; ids != nil {
		return func(x quotashare.Executor) {
			if f, ok := x.(quotashare.Forgetter); ok {
				if err := f.Forget(ids); err != nil {
					e.cfg.Control.Logf("quotashare: removing the output of attempts %s: %v", strings.Join(ids, ", "), err)
				}
			}
		}
	}
	if id := a.Ended; id != "" {
		return func(x quotashare.Executor) {
			if s, ok := x.(quotashare.Settler); ok {
				s.Ended(id)
			}
		}
	}
	id := a.Stop
	return func(x quotashare.Executor) {
		if err := x.Stop(id); err != nil {
			e.cfg.Control.Logf("quotashare: stopping attempt %s: %v (the executor retries on its next report)", id, err)
		}
	}
}

// parse gives an attempt its parsed payload, outside the lock (in actLoop, or before
// Recover), when it has none: a job that starts in the cycle after its submit has the
// request its submit parsed (Engine.parsed); one that waited is parsed again here, rather
// than every waiting job keeping its parsed request in memory. The payload was checked at
// submit, so this does not fail; if it ever did, the executor refuses the attempt as
// CannotStart for want of a request.
func (e *Engine) parse(spec *quotashare.AttemptSpec) {
	req, err := trainingjob.Parse(spec.Payload)
	if err != nil {
		e.cfg.Control.Logf("quotashare: job %s: its stored payload no longer parses: %v", spec.JobID, err)
		return
	}
	spec.Request = req
}
