package batchapi

import (
	"strings"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/control"
)

// ARNs makes and reads the ARNs of what the API serves; nothing behind the API knows
// them. The state names resources by name and jobs by id: an ARN holds the region and
// account the server runs as, so a data folder restarted under another --region answers
// with ARNs of the new one and still finds everything.
type ARNs struct{ Region, Account string }

// prefix begins every ARN of this server's AWS Batch resources.
func (a ARNs) prefix() string { return "arn:aws:batch:" + a.Region + ":" + a.Account + ":" }

func (a ARNs) batch(kind, name string) string { return a.prefix() + kind + "/" + name }

// Policy is a scheduling policy's ARN.
func (a ARNs) Policy(name string) string { return a.batch("scheduling-policy", name) }

// Environment is a service environment's ARN.
func (a ARNs) Environment(name string) string { return a.batch("service-environment", name) }

// Queue is a job queue's ARN.
func (a ARNs) Queue(name string) string { return a.batch("job-queue", name) }

// Share is a quota share's ARN: its queue's, then /quota-share/ and its name.
func (a ARNs) Share(queue, name string) string { return a.Queue(queue) + "/quota-share/" + name }

// Job is a service job's ARN.
func (a ARNs) Job(id string) string { return a.batch("service-job", id) }

// TrainingJob is the SageMaker-style ARN of an attempt (a serviceResourceId).
func (a ARNs) TrainingJob(attempt string) string {
	return "arn:aws:sagemaker:" + a.Region + ":" + a.Account + ":training-job/" + attempt
}

// name reads a reference to a resource of the kind ("job-queue", ...): a name, or an ARN.
// A reference that is neither is an error naming the field. An ARN of another region,
// account or kind is kept whole: no resource has such a name (names hold no ':'), so the
// state answers that it does not exist, naming the ARN as it was given.
func (a ARNs) name(field, kind, ref string) (string, error) {
	if ref == "" {
		return "", quotashare.Errorf(quotashare.Invalid, "%s: is required", field)
	}
	if strings.HasPrefix(ref, "arn:") {
		if n, ok := strings.CutPrefix(ref, a.batch(kind, "")); ok && quotashare.ValidName(n) {
			return n, nil
		}
		return ref, nil
	}
	if !quotashare.ValidName(ref) {
		return "", quotashare.Errorf(quotashare.Invalid, "%s: %q is neither an ARN nor a name of 1-128 letters, digits, '-' or '_'", field, ref)
	}
	return ref, nil
}

// queue reads the jobQueue member: a job queue's name or ARN.
func (a ARNs) queue(ref string) (string, error) { return a.name("jobQueue", "job-queue", ref) }

// names reads a list of references, as name does.
func (a ARNs) names(field, kind string, refs []string) ([]string, error) {
	out := make([]string, 0, len(refs))
	for _, r := range refs {
		n, err := a.name(field, kind, r)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// share reads a quota share's ARN.
func (a ARNs) share(ref string) (control.ShareRef, error) {
	if ref == "" {
		return control.ShareRef{}, quotashare.Errorf(quotashare.Invalid, "quotaShareArn: is required")
	}
	q, name, ok := strings.Cut(ref, "/quota-share/")
	if !ok || !strings.HasPrefix(q, "arn:") {
		return control.ShareRef{}, quotashare.Errorf(quotashare.Invalid, "quotaShareArn: %q is not a quota share ARN (<job queue ARN>/quota-share/<name>)", ref)
	}
	queue, err := a.name("quotaShareArn", "job-queue", q)
	return control.ShareRef{Queue: queue, Name: name}, err
}

// jobID reads a job reference: its id, or a service-job ARN (of any region, as before
// names were the state's keys).
func jobID(ref string) string {
	if strings.HasPrefix(ref, "arn:") {
		if _, id, ok := strings.Cut(ref, ":service-job/"); ok {
			return id
		}
	}
	return ref
}

// resource reads the ARN of a resource that carries tags; ok is false when it names
// none that this server could hold, and r is then the zero Resource.
func (a ARNs) resource(arn string) (r control.Resource, ok bool) {
	if _, id, ok := strings.Cut(arn, ":service-job/"); ok && strings.HasPrefix(arn, "arn:") {
		return control.Resource{Kind: control.JobResource, Name: id}, true
	}
	rest, ok := strings.CutPrefix(arn, a.prefix())
	if !ok {
		return r, false
	}
	kind, name, _ := strings.Cut(rest, "/")
	switch kind {
	case "scheduling-policy":
		return control.Resource{Kind: control.PolicyResource, Name: name}, true
	case "service-environment":
		return control.Resource{Kind: control.EnvironmentResource, Name: name}, true
	case "job-queue":
		if q, s, ok := strings.Cut(name, "/quota-share/"); ok {
			return control.Resource{Kind: control.ShareResource, Queue: q, Name: s}, true
		}
		return control.Resource{Kind: control.QueueResource, Name: name}, true
	}
	return r, false
}
