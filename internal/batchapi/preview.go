package batchapi

import (
	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/control"
)

// POST /v1/previewchanges is quotashare's own operation, not AWS's: what a set of changes
// to a queue's environment and shares would do to its running jobs, as `quotashare apply
// --dry-run` prints it. The changes are in the order they would be made; each is the body
// of an UpdateServiceEnvironment (capacityLimits) or a CreateQuotaShare/UpdateQuotaShare
// (quotaShare, by name). Nothing is changed.

type previewIn struct {
	JobQueue string `json:"jobQueue"`
	Changes  []struct {
		CapacityLimits []capacityLimit `json:"capacityLimits"`
		QuotaShare     *shareIn        `json:"quotaShare"`
	} `json:"changes"`
}

type previewPreemption struct {
	JobID          string `json:"jobId"`
	JobName        string `json:"jobName"`
	QuotaShareName string `json:"quotaShareName"`
	Rule           string `json:"rule"`
	Reason         string `json:"reason"`
}

type previewBorrowing struct {
	JobID          string `json:"jobId"`
	JobName        string `json:"jobName"`
	QuotaShareName string `json:"quotaShareName"`
	// Borrowed is the part of what the attempt holds above its share's limit, as
	// capacityLimits (capacityUnit, maxCapacity: the count).
	Borrowed []capacityLimit `json:"borrowed"`
}

type previewOut struct {
	Preemptions []previewPreemption `json:"preemptions"`
	Preemptible []previewBorrowing  `json:"preemptible"`
}

func (h *Handler) preview(in *previewIn) (any, error) {
	queue, err := h.arns.queue(in.JobQueue)
	if err != nil {
		return nil, err
	}
	var changes []control.PreviewChange
	for i, c := range in.Changes {
		switch {
		case c.QuotaShare != nil && c.CapacityLimits != nil:
			return nil, quotashare.Errorf(quotashare.Invalid, "changes[%d]: give capacityLimits or quotaShare, not both", i)
		case c.QuotaShare != nil:
			sin, err := shareInput(c.QuotaShare)
			if err != nil {
				return nil, err
			}
			if sin.Name == "" {
				return nil, quotashare.Errorf(quotashare.Invalid, "changes[%d].quotaShare.quotaShareName: is required", i)
			}
			changes = append(changes, control.PreviewChange{Share: &sin})
		case c.CapacityLimits != nil:
			limits, err := demands("capacityLimits", c.CapacityLimits)
			if err != nil {
				return nil, err
			}
			changes = append(changes, control.PreviewChange{EnvironmentLimits: limits})
		default:
			return nil, quotashare.Errorf(quotashare.Invalid, "changes[%d]: give capacityLimits or quotaShare", i)
		}
	}
	p, err := control.Get(h.e, func(st *control.State) (control.Preview, error) { return st.Preview(queue, changes) })
	if err != nil {
		return nil, err
	}
	out := previewOut{Preemptions: []previewPreemption{}, Preemptible: []previewBorrowing{}}
	for _, x := range p.Preemptions {
		out.Preemptions = append(out.Preemptions, previewPreemption{x.JobID, x.JobName, x.Share, x.Rule, x.Reason})
	}
	for _, x := range p.Preemptible {
		out.Preemptible = append(out.Preemptible, previewBorrowing{x.JobID, x.JobName, x.Share, limitsOut(x.Borrowed)})
	}
	return out, nil
}
