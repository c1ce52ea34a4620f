package batchapi

import (
	"strings"
	"testing"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/control"
)

var euARNs = ARNs{Region: "eu-west-1", Account: "123456789012"}

func TestARNsRender(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{euARNs.Policy("p"), "arn:aws:batch:eu-west-1:123456789012:scheduling-policy/p"},
		{euARNs.Environment("e"), "arn:aws:batch:eu-west-1:123456789012:service-environment/e"},
		{euARNs.Queue("q"), "arn:aws:batch:eu-west-1:123456789012:job-queue/q"},
		{euARNs.Share("q", "a"), "arn:aws:batch:eu-west-1:123456789012:job-queue/q/quota-share/a"},
		{euARNs.Job("j-1"), "arn:aws:batch:eu-west-1:123456789012:service-job/j-1"},
		{euARNs.TrainingJob("j-1-2"), "arn:aws:sagemaker:eu-west-1:123456789012:training-job/j-1-2"},
	} {
		if c.got != c.want {
			t.Errorf("got %s, want %s", c.got, c.want)
		}
	}
}

// TestARNsRead: a reference is a name or an ARN of this server's region, account and the
// kind asked; an ARN of another is kept whole, so that the state finds no such resource
// and says so with the ARN given; anything else is refused naming the field.
func TestARNsRead(t *testing.T) {
	for _, c := range []struct {
		ref, want, err string
	}{
		{ref: "q", want: "q"},
		{ref: "arn:aws:batch:eu-west-1:123456789012:job-queue/q", want: "q"},
		{ref: "arn:aws:batch:us-east-1:123456789012:job-queue/q", want: "arn:aws:batch:us-east-1:123456789012:job-queue/q"},
		{ref: "arn:aws:batch:eu-west-1:000000000000:job-queue/q", want: "arn:aws:batch:eu-west-1:000000000000:job-queue/q"},
		{ref: "arn:aws:batch:eu-west-1:123456789012:service-environment/q", want: "arn:aws:batch:eu-west-1:123456789012:service-environment/q"},
		{ref: "arn:aws:batch:eu-west-1:123456789012:job-queue/q/quota-share/a", want: "arn:aws:batch:eu-west-1:123456789012:job-queue/q/quota-share/a"},
		{ref: "", err: "jobQueue: is required"},
		{ref: "q w", err: `jobQueue: "q w" is neither an ARN nor a name of 1-128 letters, digits, '-' or '_'`},
	} {
		got, err := euARNs.name("jobQueue", "job-queue", c.ref)
		if c.err != "" {
			if err == nil || err.Error() != c.err || quotashare.KindOf(err) != quotashare.Invalid {
				t.Errorf("%q: got %q, %v; want the error %q", c.ref, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: got %q, %v; want %q", c.ref, got, err, c.want)
		}
	}
	if _, err := euARNs.names("jobQueues", "job-queue", []string{"q", "bad name"}); err == nil || !strings.HasPrefix(err.Error(), "jobQueues: ") {
		t.Errorf("a bad name in a list: %v", err)
	}
}

func TestARNsShare(t *testing.T) {
	for _, c := range []struct {
		ref  string
		want control.ShareRef
		err  string
	}{
		{ref: "arn:aws:batch:eu-west-1:123456789012:job-queue/q/quota-share/a", want: control.ShareRef{Queue: "q", Name: "a"}},
		// Of another region: no queue is named so.
		{ref: "arn:aws:batch:us-east-1:123456789012:job-queue/q/quota-share/a", want: control.ShareRef{Queue: "arn:aws:batch:us-east-1:123456789012:job-queue/q", Name: "a"}},
		{ref: "", err: "quotaShareArn: is required"},
		{ref: "q/quota-share/a", err: "is not a quota share ARN"},
		{ref: "arn:aws:batch:eu-west-1:123456789012:job-queue/q", err: "is not a quota share ARN"},
	} {
		got, err := euARNs.share(c.ref)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.HasPrefix(err.Error(), "quotaShareArn: ") {
				t.Errorf("%q: got %+v, %v; want an error with %q", c.ref, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: got %+v, %v; want %+v", c.ref, got, err, c.want)
		}
	}
}

func TestARNsResource(t *testing.T) {
	p := "arn:aws:batch:eu-west-1:123456789012:"
	for _, c := range []struct {
		arn  string
		want control.Resource
		ok   bool
	}{
		{p + "scheduling-policy/p", control.Resource{Kind: control.PolicyResource, Name: "p"}, true},
		{p + "service-environment/e", control.Resource{Kind: control.EnvironmentResource, Name: "e"}, true},
		{p + "job-queue/q", control.Resource{Kind: control.QueueResource, Name: "q"}, true},
		{p + "job-queue/q/quota-share/a", control.Resource{Kind: control.ShareResource, Queue: "q", Name: "a"}, true},
		{p + "service-job/j", control.Resource{Kind: control.JobResource, Name: "j"}, true},
		{"arn:aws:batch:us-east-1:000000000000:service-job/j", control.Resource{Kind: control.JobResource, Name: "j"}, true},
		{"arn:aws:batch:us-east-1:000000000000:job-queue/q", control.Resource{}, false},
		{p + "compute-environment/c", control.Resource{}, false},
		{"q", control.Resource{}, false},
	} {
		got, ok := euARNs.resource(c.arn)
		if ok != c.ok || got != c.want {
			t.Errorf("%s: got %+v %v, want %+v %v", c.arn, got, ok, c.want, c.ok)
		}
	}
	for ref, want := range map[string]string{"j": "j", "arn:aws:batch:us-east-1:000000000000:service-job/j": "j", "arn:x": "arn:x"} {
		if got := jobID(ref); got != want {
			t.Errorf("jobID(%q) = %q, want %q", ref, got, want)
		}
	}
}
