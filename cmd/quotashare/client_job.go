package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/batchapi"
	"github.com/quotashare/quotashare/internal/sdkx"
)

// describeJob asks for a job, with its reason code from quotashare's own member.
func describeJob(cf *clientFlags, id string) (*batch.DescribeServiceJobOutput, batchapi.Reason, error) {
	return describeWith(cf.client(), id, cf)
}

func describeWith(c *batch.Client, id string, cf *clientFlags) (*batch.DescribeServiceJobOutput, batchapi.Reason, error) {
	var raw []byte
	d, err := c.DescribeServiceJob(context.Background(), &batch.DescribeServiceJobInput{JobId: aws.String(id)}, keepBody(&raw))
	if err != nil {
		return nil, batchapi.Reason{}, cf.apiError(err)
	}
	var member struct {
		Reason batchapi.Reason `json:"quotashareReason"`
	}
	json.Unmarshal(raw, &member) // the SDK decoded the same body: it is JSON
	return d, member.Reason, nil
}

// keepBody keeps an answer's raw body, for the members of quotashare's own that the SDK
// decodes past.
var keepBody = sdkx.KeepBody

func when(ms *int64) string {
	if ms == nil {
		return "-"
	}
	return time.UnixMilli(*ms).UTC().Format("2006-01-02 15:04:05Z")
}

func instances(us []types.ServiceJobCapacityUsageDetail) string {
	var parts []string
	for _, u := range us {
		parts = append(parts, fmt.Sprintf("%g x %s", aws.ToFloat64(u.Quantity), aws.ToString(u.CapacityUnit)))
	}
	return strings.Join(parts, ", ")
}

// attemptName is the attempt's id, the last part of its training-job ARN.
func attemptName(id *types.ServiceResourceId) string {
	if id == nil {
		return "-"
	}
	v := aws.ToString(id.Value)
	return v[strings.LastIndex(v, "/")+1:]
}

// jobView is describe's JSON: the DescribeServiceJob answer's members that matter.
type jobView struct {
	ID             string        `json:"jobId"`
	Name           string        `json:"jobName"`
	Queue          string        `json:"jobQueue"`
	Share          string        `json:"quotaShareName"`
	Status         string        `json:"status"`
	StatusReason   string        `json:"statusReason"`
	Priority       int32         `json:"schedulingPriority"`
	Instances      string        `json:"instances"`
	CreatedAt      string        `json:"createdAt"`
	StartedAt      string        `json:"startedAt"`
	StoppedAt      string        `json:"stoppedAt"`
	IsTerminated   bool          `json:"isTerminated"`
	Attempts       []attemptView `json:"attempts"`
	PreemptedCount int32         `json:"preemptedAttemptCount"`
	Preempted      []attemptView `json:"recentPreemptedAttempts"`
}

type attemptView struct {
	Attempt      string `json:"attempt"`
	StartedAt    string `json:"startedAt"`
	StoppedAt    string `json:"stoppedAt"`
	StatusReason string `json:"statusReason"`
}

func viewOf(d *batch.DescribeServiceJobOutput) jobView {
	v := jobView{ID: aws.ToString(d.JobId), Name: aws.ToString(d.JobName), Queue: aws.ToString(d.JobQueue), Share: aws.ToString(d.QuotaShareName),
		Status: string(d.Status), StatusReason: aws.ToString(d.StatusReason), Priority: aws.ToInt32(d.SchedulingPriority),
		Instances: instances(d.CapacityUsage), CreatedAt: when(d.CreatedAt), StartedAt: when(d.StartedAt), StoppedAt: when(d.StoppedAt),
		IsTerminated: aws.ToBool(d.IsTerminated), Attempts: []attemptView{}, Preempted: []attemptView{}}
	for _, a := range d.Attempts {
		v.Attempts = append(v.Attempts, attemptView{attemptName(a.ServiceResourceId), when(a.StartedAt), when(a.StoppedAt), aws.ToString(a.StatusReason)})
	}
	if ps := d.PreemptionSummary; ps != nil {
		v.PreemptedCount = aws.ToInt32(ps.PreemptedAttemptCount)
		for _, a := range ps.RecentPreemptedAttempts {
			v.Preempted = append(v.Preempted, attemptView{attemptName(a.ServiceResourceId), when(a.StartedAt), when(a.StoppedAt), aws.ToString(a.StatusReason)})
		}
	}
	return v
}

const describeUsage = `usage: quotashare describe [flags] JOB

Shows a job: its state and reason, its attempts and its preemptions.
` + jobRef + `

Example:
  quotashare describe 3f1c...e2 --output json
`

func describeCmd(args []string, stdout, stderr io.Writer) error {
	fs, cf := newFlags("describe", describeUsage, stderr)
	if err := parseCommand(fs, args, cf, 1, "exactly one job id"); err != nil {
		return err
	}
	var d *batch.DescribeServiceJobOutput
	if err := withJob(cf, fs.Arg(0), func(id string) (err error) {
		d, _, err = describeJob(cf, id)
		return err
	}); err != nil {
		return err
	}
	v := viewOf(d)
	if cf.output == "json" {
		return printJSON(stdout, v)
	}
	line := func(k, val string) { fmt.Fprint(stdout, wrap(fmt.Sprintf("%-10s ", k), val, 80, 11)) }
	line("job", v.Name+" ("+v.ID+")")
	line("share", v.Share)
	line("state", v.Status)
	line("priority", strconv.Itoa(int(v.Priority)))
	line("instances", v.Instances)
	line("created", v.CreatedAt)
	line("reason", v.StatusReason)
	for _, a := range v.Attempts {
		// Numbered as their ids are (<job id>-N): preempted attempts take numbers too.
		_, n, _ := quotashare.ParseAttemptID(a.Attempt)
		line("attempt "+strconv.Itoa(n), a.Attempt+": "+a.StartedAt+" to "+a.StoppedAt+": "+a.StatusReason)
	}
	if v.PreemptedCount > 0 {
		line("preempted", fmt.Sprintf("%d time(s); the latest first:", v.PreemptedCount))
		for _, a := range v.Preempted {
			line("", a.Attempt+": "+a.StartedAt+" to "+a.StoppedAt+": "+a.StatusReason)
		}
	}
	return nil
}

const explainUsage = `usage: quotashare explain [flags] JOB

Says in sentences why a job waits, why it was preempted, or how it ended: the rule and the
numbers.
` + jobRef + `

Example:
  quotashare explain 3f1c...e2
`

func explainCmd(args []string, stdout, stderr io.Writer) error {
	fs, cf := newFlags("explain", explainUsage, stderr)
	if err := parseCommand(fs, args, cf, 1, "exactly one job id"); err != nil {
		return err
	}
	var d *batch.DescribeServiceJobOutput
	var reason batchapi.Reason
	if err := withJob(cf, fs.Arg(0), func(id string) (err error) {
		d, reason, err = describeJob(cf, id)
		return err
	}); err != nil {
		return err
	}
	v := viewOf(d)
	where := "share " + v.Share
	if v.Share == "" {
		where = "FIFO queue" // no quota share
	}
	var out []string
	switch d.Status {
	case types.ServiceJobStatusRunnable, types.ServiceJobStatusSubmitted, types.ServiceJobStatusPending:
		out = append(out, fmt.Sprintf("%s (%s, priority %d) waits for %s.", v.Name, where, v.Priority, v.Instances))
		if reason.Detail != "" {
			out = append(out, "Why: "+reason.Detail)
		} else {
			out = append(out, "Why: "+v.StatusReason)
		}
		if h := quotashare.ReasonCode(reason.Code).Hint(); h != "" && v.Share != "" {
			out = append(out, h)
		} else if v.Share == "" && reason.Code == "NO_FREE_CAPACITY" {
			out = append(out, "It starts, by priority then submission, as soon as the environment has enough free instances.")
		}
	case types.ServiceJobStatusScheduled, types.ServiceJobStatusStarting, types.ServiceJobStatusRunning:
		out = append(out, fmt.Sprintf("%s (%s, priority %d) is %s on %s.", v.Name, where, v.Priority, v.Status, v.Instances))
		if quotashare.ReasonCode(reason.Code) == quotashare.ReasonPreempting {
			out = append(out, "It is being preempted: "+reason.Detail+
				". It got SIGTERM to checkpoint; it returns to the queue once its processes have stopped.")
		} else {
			out = append(out, v.StatusReason+".")
		}
	default:
		out = append(out, fmt.Sprintf("%s ended %s at %s: %s", v.Name, v.Status, v.StoppedAt, v.StatusReason))
	}
	if v.PreemptedCount > 0 {
		out = append(out, fmt.Sprintf("It was preempted %d time(s). The latest: %s", v.PreemptedCount, v.Preempted[0].StatusReason))
	}
	if cf.output == "json" {
		return printJSON(stdout, map[string]any{"jobId": v.ID, "status": v.Status, "explanation": out})
	}
	for _, s := range out {
		fmt.Fprint(stdout, wrap("", s, 80, 2))
	}
	return nil
}

// wrap writes prefix and then text broken into lines of at most width columns at spaces,
// indenting the lines after the first; each line ends in a newline. A word longer than a
// line stays whole.
func wrap(prefix, text string, width, indent int) string {
	var b strings.Builder
	b.WriteString(prefix)
	col := len([]rune(prefix))
	for i, word := range strings.Fields(text) {
		n := len([]rune(word))
		switch {
		case i == 0:
		case col+1+n > width:
			b.WriteString("\n" + strings.Repeat(" ", indent))
			col = indent
		default:
			b.WriteByte(' ')
			col++
		}
		b.WriteString(word)
		col += n
	}
	b.WriteByte('\n')
	return b.String()
}

const priorityUsage = `usage: quotashare priority [flags] JOB PRIORITY

Changes a job's schedulingPriority (0-9999); the next scheduling pass uses it, for the
order of its share's queue and for in-share preemption.
` + jobRef + `

Example:
  quotashare priority 3f1c...e2 4
`

func priorityCmd(args []string, stdout, stderr io.Writer) error {
	fs, cf := newFlags("priority", priorityUsage, stderr)
	if err := parseCommand(fs, args, cf, 2, "a job id and a priority"); err != nil {
		return err
	}
	p, err := strconv.Atoi(fs.Arg(1))
	if err != nil {
		return fmt.Errorf("PRIORITY: %q is not a whole number", fs.Arg(1))
	}
	var out *batch.UpdateServiceJobOutput
	if err := withJob(cf, fs.Arg(0), func(id string) (err error) {
		out, err = cf.client().UpdateServiceJob(context.Background(), &batch.UpdateServiceJobInput{JobId: aws.String(id), SchedulingPriority: aws.Int32(int32(p))})
		if err != nil {
			return cf.apiError(err)
		}
		return nil
	}); err != nil {
		return err
	}
	if cf.output == "json" {
		return printJSON(stdout, map[string]any{"jobId": aws.ToString(out.JobId), "schedulingPriority": p})
	}
	fmt.Fprintf(stdout, "%s now has priority %d\n", aws.ToString(out.JobName), p)
	return nil
}

const terminateUsage = `usage: quotashare terminate [flags] JOB --reason TEXT

Ends a job as FAILED with the reason: at once if it waits, once its processes have stopped
(SIGTERM, then SIGKILL after the grace period) if it runs.
` + jobRef + `

Example:
  quotashare terminate 3f1c...e2 --reason "superseded by train-2"
`

func terminateCmd(args []string, stdout, stderr io.Writer) error {
	fs, cf := newFlags("terminate", terminateUsage, stderr)
	reason := fs.String("reason", "", "why (required); the job's statusReason")
	if err := parseCommand(fs, args, cf, 1, "exactly one job id"); err != nil {
		return err
	}
	if *reason == "" {
		return errors.New("--reason: is required")
	}
	var id string
	if err := withJob(cf, fs.Arg(0), func(ref string) error {
		id = ref
		if _, err := cf.client().TerminateServiceJob(context.Background(), &batch.TerminateServiceJobInput{JobId: aws.String(ref), Reason: aws.String(*reason)}); err != nil {
			return cf.apiError(err)
		}
		return nil
	}); err != nil {
		return err
	}
	if cf.output == "json" {
		return printJSON(stdout, map[string]string{"jobId": id, "reason": *reason})
	}
	fmt.Fprintf(stdout, "terminating %s: %s\n", id, *reason)
	return nil
}

// withJob runs a job command (fn, which reports errors as cf.apiError does) on what the
// user gave: as an id or ARN first; when the server knows no such job, as a job name,
// else as the start of an id, looked for in $QUOTASHARE_QUEUE or in every queue. An
// ambiguous name or prefix lists the candidates. A known id costs no extra request.
func withJob(cf *clientFlags, ref string, fn func(id string) error) error {
	err := fn(ref)
	if err == nil || strings.HasPrefix(ref, "arn:") || !strings.Contains(err.Error(), "does not exist") {
		return err
	}
	id, err := findJob(cf, ref, err)
	if err != nil {
		return err
	}
	return fn(id)
}

// findJob looks for a job by name, else by id prefix; with none, it returns notFound.
func findJob(cf *clientFlags, ref string, notFound error) (string, error) {
	c := cf.client()
	ctx := context.Background()
	queues := []string{os.Getenv("QUOTASHARE_QUEUE")}
	if queues[0] == "" {
		var err error
		if queues, err = queueNames(cf); err != nil {
			return "", err
		}
	}
	type candidate struct {
		id, name, queue, state, share string
		created                       time.Time
	}
	var byName, byPrefix []candidate
	// By name first, from the server's name index (JOB_NAME matches without regard to
	// case; a name here must match exactly); then, only if no name matched, every job
	// for an id that starts with ref.
	for _, filter := range []string{ref, "*"} {
		if filter == "*" && (len(byName) > 0 || len(ref) < minPrefix) {
			break
		}
		for _, q := range queues {
			in := &batch.ListServiceJobsInput{JobQueue: aws.String(q), Filters: []types.KeyValuesPair{{Name: aws.String("JOB_NAME"), Values: []string{filter}}}}
			for p := batch.NewListServiceJobsPaginator(c, in); p.HasMorePages(); {
				page, err := p.NextPage(ctx)
				if err != nil {
					return "", cf.apiError(err)
				}
				for _, j := range page.JobSummaryList {
					cand := candidate{aws.ToString(j.JobId), aws.ToString(j.JobName), q, string(j.Status), aws.ToString(j.QuotaShareName),
						time.UnixMilli(aws.ToInt64(j.CreatedAt))}
					switch {
					case cand.name == ref && filter != "*":
						byName = append(byName, cand)
					case filter == "*" && strings.HasPrefix(cand.id, ref):
						byPrefix = append(byPrefix, cand)
					}
				}
			}
		}
	}
	for _, found := range [][]candidate{byName, byPrefix} {
		switch len(found) {
		case 0:
			continue
		case 1:
			return found[0].id, nil
		}
		var lines []string
		for _, f := range found {
			lines = append(lines, fmt.Sprintf("  %s  %s  %s, share %s, queue %s, %s old", f.id, f.name, f.state, f.share, f.queue, age(time.Since(f.created))))
		}
		return "", fmt.Errorf("%q names %d jobs; give one of their ids:\n%s", ref, len(found), strings.Join(lines, "\n"))
	}
	if len(ref) < minPrefix {
		return "", fmt.Errorf("%w; and %q is too short to be the start of an id (at least %d characters)", notFound, ref, minPrefix)
	}
	return "", notFound
}

// jobRef says, in each job command's help, what JOB may be.
const jobRef = `JOB is the job's id or ARN, its name (unique across the queues, or in $QUOTASHARE_QUEUE),
or the first 4 or more characters of its id; an ambiguous one lists the candidates.`

// queueHelp is the --queue flag's help where it may be left out.
const queueHelp = "the job queue (default: $QUOTASHARE_QUEUE, else the server's only queue)"

// minPrefix is the fewest characters of an id that name a job: one or two would pick a
// job at random among many.
const minPrefix = 4
