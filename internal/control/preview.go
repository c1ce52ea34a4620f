package control

import (
	"maps"

	"github.com/quotashare/quotashare"
)

// PreviewChange is one change a setup would make to a queue, in the order apply makes them:
// the environment's capacity (EnvironmentLimits non-nil), or a share to create or update.
type PreviewChange struct {
	EnvironmentLimits []quotashare.Demand
	Share             *ShareInput
}

// PreviewPreemption is an attempt the changes would preempt at once.
type PreviewPreemption struct {
	JobID, JobName, Share, Rule, Reason string
}

// PreviewBorrowing is an attempt the changes leave on borrowed capacity (its share over
// its limit, and the attempt among those a reclaim would take first): it keeps running,
// and is preemptible (reclaim) when an owner needs the capacity. Borrowed is how much of
// what it holds is above the limit.
type PreviewBorrowing struct {
	JobID, JobName, Share string
	Borrowed              []quotashare.Demand
}

// Preview is what a set of changes would do to a queue's running jobs.
type Preview struct {
	Preemptions []PreviewPreemption
	Preemptible []PreviewBorrowing
}

// Preview tries changes on a copy of the queue's scheduler, rebuilt as a restart would,
// with the validation and the scheduler calls of the real updates, and a scheduling pass
// after each change, as the real requests each get one before they are answered. Nothing
// is changed or stored. Events that arrive meanwhile (reports, submits) can make the real
// apply differ.
func (st *State) Preview(queue string, changes []PreviewChange) (Preview, error) {
	var out Preview
	qs, err := st.queueNamed(queue)
	if err != nil {
		return out, err
	}
	s, err := st.rebuild(qs)
	if err != nil {
		return out, quotashare.Errorf(quotashare.Internal, "rebuilding queue %s: %v", qs.q.Name, err)
	}
	shares := maps.Clone(qs.shares)
	now := st.now()
	for _, ch := range changes {
		if ch.EnvironmentLimits != nil {
			if err := checkEnvLimits(ch.EnvironmentLimits); err != nil {
				return out, err
			}
			if err := s.SetCapacity(ch.EnvironmentLimits); err != nil {
				return out, invalid("%w", err)
			}
		}
		if in := ch.Share; in != nil {
			cur, ok := shares[in.Name]
			base := quotashare.QuotaShare{Name: in.Name}
			if ok {
				base = *cur
			}
			cfg, err := shareConfig(base, *in, !ok)
			if err != nil {
				return out, err
			}
			if err := s.SetShare(schedShare(&cfg)); err != nil {
				return out, invalid("%w", err)
			}
			shares[in.Name] = &cfg
		}
		for _, p := range s.Plan(now).Preemptions {
			j := st.jobs[p.JobID]
			out.Preemptions = append(out.Preemptions, PreviewPreemption{JobID: p.JobID, JobName: j.Name, Share: p.Share,
				Rule: p.Rule.String(), Reason: p.Reason})
		}
	}
	// Exactly what the core counts as borrowed once the changes are made, on the attempts
	// a reclaim would take first (sched.Borrowers): the count per share and type is what
	// `quotashare shares` shows as borrowed, less what is being stopped already.
	for _, b := range s.Borrowers() {
		j := st.jobs[b.JobID]
		out.Preemptible = append(out.Preemptible, PreviewBorrowing{JobID: b.JobID, JobName: j.Name, Share: b.Share, Borrowed: b.Borrowed})
	}
	return out, nil
}
