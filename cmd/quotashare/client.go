package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/trainingjob"
)

// clientFlags are the flags every client command takes.
type clientFlags struct {
	endpoint, output string
}

func (c *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.endpoint, "endpoint", defaultEndpoint(), endpointHelp)
	fs.StringVar(&c.output, "output", "table", "table or json")
}

func (c *clientFlags) check() error {
	if c.output != "table" && c.output != "json" {
		return fmt.Errorf("--output: %q must be table or json", c.output)
	}
	return nil
}

const endpointHelp = "the quotashare server (default: $QUOTASHARE_ENDPOINT, else $AWS_ENDPOINT_URL_BATCH, else $AWS_ENDPOINT_URL, the variables the AWS SDKs read, else http://127.0.0.1:8080)"

// defaultEndpoint is the server a client command talks to without --endpoint.
func defaultEndpoint() string {
	for _, v := range []string{"QUOTASHARE_ENDPOINT", "AWS_ENDPOINT_URL_BATCH", "AWS_ENDPOINT_URL"} {
		if e := os.Getenv(v); e != "" {
			return e
		}
	}
	return "http://127.0.0.1:8080"
}

// client is the official SDK pointed at the server; it signs with AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY when they are set (a server started with --credentials wants them).
func (c *clientFlags) client() *batch.Client {
	id, secret := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	if id == "" || secret == "" {
		id, secret = "quotashare", "quotashare"
	}
	region := os.Getenv("AWS_REGION")
	if region == "" {
		region = "us-east-1"
	}
	return batch.New(batch.Options{BaseEndpoint: aws.String(c.endpoint), Region: region, RetryMaxAttempts: 2,
		Credentials: credentials.NewStaticCredentialsProvider(id, secret, os.Getenv("AWS_SESSION_TOKEN"))})
}

// objects is an S3 client of the server's object store, with the Batch client's
// credentials and region.
func (c *clientFlags) objects() *s3.Client {
	o := c.client().Options()
	return s3.New(s3.Options{BaseEndpoint: o.BaseEndpoint, Region: o.Region, Credentials: o.Credentials, UsePathStyle: true, RetryMaxAttempts: 2})
}

// ensureBucket makes the bucket of an s3:// URI in the server's object store if it is
// not there, and says so.
func (c *clientFlags) ensureBucket(ctx context.Context, uri string, say func(string, ...any)) error {
	bucket, _, err := trainingjob.ParseS3URI(uri)
	if err != nil {
		return err
	}
	s := c.objects()
	if _, err := s.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)}); err == nil {
		return nil
	}
	if _, err := s.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		return fmt.Errorf("making the bucket %s in the server's object store: %w", bucket, c.apiError(err))
	}
	say("made the bucket %s in the server's object store", bucket)
	return nil
}

// apiError turns an SDK error into one line.
func (c *clientFlags) apiError(err error) error {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return errors.New(ae.ErrorMessage())
	}
	var ne *net.OpError
	if errors.As(err, &ne) {
		return fmt.Errorf("no quotashare server answers at %s (%v): start one with quotashare serve, or give --endpoint", c.endpoint, ne.Err)
	}
	var oe *smithy.OperationError
	if errors.As(err, &oe) {
		return fmt.Errorf("%s: %v", oe.OperationName, errors.Unwrap(oe.Err))
	}
	return err
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// parseCommand parses a client command's flags (flags may follow the arguments) and
// checks the number of arguments.
func parseCommand(fs *flag.FlagSet, args []string, cf *clientFlags, nargs int, what string) error {
	if err := fs.Parse(reorder(fs, args)); err != nil {
		return err
	}
	if err := cf.check(); err != nil {
		return err
	}
	if nargs >= 0 && fs.NArg() != nargs {
		fs.Usage()
		return fmt.Errorf("%s takes %s", fs.Name(), what)
	}
	return nil
}

func newFlags(name, usage string, stderr io.Writer) (*flag.FlagSet, *clientFlags) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	cf := &clientFlags{}
	cf.register(fs)
	return fs, cf
}

const submitUsage = `usage: quotashare submit [flags] -- PROGRAM [ARG...]
       quotashare submit [flags] --file CREATE_TRAINING_JOB.json

Submits a training job to a quota share: PROGRAM runs once per instance (the local
executor's ContainerEntrypoint), or the payload is a SageMaker CreateTrainingJob request.

Example:
  quotashare submit --queue three-projects --share qs2 --name train-1 --priority 5 \
      --instance-type ml.g5.xlarge --count 2 -- python3 train.py --epochs 3
`

func submitCmd(args []string, stdout, stderr io.Writer) error {
	fs, cf := newFlags("submit", submitUsage, stderr)
	queue := fs.String("queue", "", queueHelp+"; a name or ARN")
	share := fs.String("share", "", "quota share (none for a FIFO queue)")
	name := fs.String("name", "", "job name (letters, digits, - and _; default: the program's or the file's TrainingJobName, then -YYYYMMDD-HHMMSS, as the SageMaker SDK names jobs)")
	prio := fs.Int("priority", 0, "schedulingPriority, 0-9999: higher runs first within the share")
	itype := fs.String("instance-type", "ml.g5.xlarge", "instance type")
	count := fs.Int("count", 1, "instances")
	file := fs.String("file", "", "a SageMaker CreateTrainingJob request in JSON, instead of PROGRAM")
	retries := fs.Int("retries", 1, "retryStrategy.attempts, counting the first (1-10)")
	preempt := fs.Int("preemption-retries", -1, "requeues after preemption before the job fails (-1: unlimited)")
	timeout := fs.Duration("timeout", 0, "the longest an attempt may run (0: no limit)")
	checkpoint := fs.String("checkpoint", "", "s3://bucket/prefix in the server's object store (the bucket is made if missing): what the job writes in /opt/ml/checkpoints is kept there, and each attempt, a preempted job's next one included, starts with it (the payload's CheckpointConfig)")
	// Everything after "--" is the program; flags come before it.
	var program []string
	for i, a := range args {
		if a == "--" {
			args, program = args[:i], args[i+1:]
			break
		}
	}
	if err := parseCommand(fs, args, cf, 0, "no arguments besides the program after --"); err != nil {
		return err
	}
	if q, err := queueOf(cf, *queue); err != nil {
		return err
	} else {
		*queue = q
	}
	if *name == "" && len(program) > 0 {
		*name = defaultJobName(filepath.Base(program[0]), time.Now())
	}
	payload := ""
	switch {
	case *file != "" && len(program) > 0:
		return errors.New("give either --file or a program after --, not both")
	case *file != "":
		b, err := os.ReadFile(*file)
		if err != nil {
			return fmt.Errorf("--file: %w", err)
		}
		payload = string(b)
		if *name == "" {
			var p struct{ TrainingJobName string }
			json.Unmarshal(b, &p)
			*name = defaultJobName(cmp.Or(p.TrainingJobName, strings.TrimSuffix(filepath.Base(*file), filepath.Ext(*file))), time.Now())
		}
	case len(program) > 0:
		b, _ := json.Marshal(map[string]any{
			"TrainingJobName":        *name,
			"AlgorithmSpecification": map[string]any{"TrainingInputMode": "File", "ContainerEntrypoint": program},
			"ResourceConfig":         map[string]any{"InstanceType": *itype, "InstanceCount": *count},
		})
		payload = string(b)
	default:
		fs.Usage()
		return errors.New("give the program to run after --, or --file")
	}
	if *checkpoint != "" {
		if _, _, err := trainingjob.ParseS3URI(*checkpoint); err != nil {
			return fmt.Errorf("--checkpoint: %w", err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(payload), &m); err != nil {
			return fmt.Errorf("--file: %w", err)
		}
		m["CheckpointConfig"] = map[string]any{"S3Uri": *checkpoint}
		b, _ := json.Marshal(m)
		payload = string(b)
		if err := cf.ensureBucket(context.Background(), *checkpoint, func(f string, a ...any) { fmt.Fprintf(stderr, f+"\n", a...) }); err != nil {
			return err
		}
	}
	in := &batch.SubmitServiceJobInput{JobName: aws.String(*name), JobQueue: aws.String(*queue),
		ServiceJobType: types.ServiceJobTypeSagemakerTraining, ServiceRequestPayload: aws.String(payload),
		SchedulingPriority: aws.Int32(int32(*prio)), RetryStrategy: &types.ServiceJobRetryStrategy{Attempts: aws.Int32(int32(*retries))}}
	if *share != "" { // a FIFO queue takes none
		in.QuotaShareName = aws.String(*share)
	}
	if *preempt >= 0 {
		in.PreemptionConfiguration = &types.ServiceJobPreemptionConfiguration{PreemptionRetriesBeforeTermination: aws.Int32(int32(*preempt))}
	}
	if *timeout > 0 {
		in.TimeoutConfig = &types.ServiceJobTimeout{AttemptDurationSeconds: aws.Int32(int32(timeout.Seconds()))}
	}
	out, err := cf.client().SubmitServiceJob(context.Background(), in)
	if err != nil {
		return cf.apiError(err)
	}
	if cf.output == "json" {
		return printJSON(stdout, map[string]string{"jobId": aws.ToString(out.JobId), "jobName": aws.ToString(out.JobName), "jobArn": aws.ToString(out.JobArn)})
	}
	fmt.Fprintf(stdout, "submitted %s: %s\n", aws.ToString(out.JobName), aws.ToString(out.JobId))
	return nil
}

// defaultJobName is a job's name when submit is given none: base (its characters outside
// a name's made -) and the time, as the SageMaker SDK names training jobs.
func defaultJobName(base string, now time.Time) string {
	b := []byte(base)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			b[i] = '-'
		}
	}
	base = strings.Trim(string(b), "-_")
	if base == "" {
		base = "job"
	}
	return base[:min(len(base), 100)] + now.UTC().Format("-20060102-150405")
}

const jobsUsage = `usage: quotashare jobs [flags]

Lists a queue's jobs, newest first: share, state, priority, instances, age, and why each
waits or what it does.

Example:
  quotashare jobs --queue three-projects --share qs1 --state RUNNABLE
`

// jobRow is one line of the jobs table, and one object of its JSON.
type jobRow struct {
	ID        string `json:"jobId"`
	Name      string `json:"jobName"`
	Share     string `json:"quotaShareName"`
	State     string `json:"status"`
	Priority  *int32 `json:"schedulingPriority,omitempty"`
	Instances string `json:"instances"`
	CreatedAt int64  `json:"createdAt"`
	Reason    string `json:"statusReason"`
	code      quotashare.ReasonCode
}

func jobsCmd(args []string, stdout, stderr io.Writer, now time.Time) error {
	fs, cf := newFlags("jobs", jobsUsage, stderr)
	queue := fs.String("queue", "", queueHelp+"; a name or ARN")
	share := fs.String("share", "", "only this quota share's jobs")
	state := fs.String("state", "", "only jobs in this state (RUNNABLE, RUNNING, ...); default: all")
	limit := fs.Int("limit", 100, "at most this many jobs")
	if err := parseCommand(fs, args, cf, 0, "no arguments"); err != nil {
		return err
	}
	if q, err := queueOf(cf, *queue); err != nil {
		return err
	} else {
		*queue = q
	}
	in := &batch.ListServiceJobsInput{JobQueue: aws.String(*queue)}
	switch {
	case *share != "":
		in.Filters = []types.KeyValuesPair{{Name: aws.String("QUOTA_SHARE_NAME"), Values: []string{*share}}}
		in.JobStatus = types.ServiceJobStatus(strings.ToUpper(*state))
	case *state != "":
		in.JobStatus = types.ServiceJobStatus(strings.ToUpper(*state))
	default: // every state: a name filter that matches all
		in.Filters = []types.KeyValuesPair{{Name: aws.String("JOB_NAME"), Values: []string{"*"}}}
	}
	var rows []jobRow
	p := batch.NewListServiceJobsPaginator(cf.client(), in)
	for p.HasMorePages() && len(rows) < *limit {
		page, err := p.NextPage(context.Background())
		if err != nil {
			return cf.apiError(err)
		}
		for _, j := range page.JobSummaryList {
			if len(rows) == *limit {
				break
			}
			var inst []string
			for _, u := range j.CapacityUsage {
				inst = append(inst, fmt.Sprintf("%g %s", aws.ToFloat64(u.Quantity), aws.ToString(u.CapacityUnit)))
			}
			rows = append(rows, jobRow{ID: aws.ToString(j.JobId), Name: aws.ToString(j.JobName), Share: aws.ToString(j.QuotaShareName),
				State: string(j.Status), Instances: strings.Join(inst, ","), CreatedAt: aws.ToInt64(j.CreatedAt), Reason: aws.ToString(j.StatusReason)})
		}
	}
	// The list's summaries carry no priority: ask for each job, a few at a time.
	c := cf.client()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range rows {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if d, reason, err := describeWith(c, rows[i].ID, cf); err == nil {
				rows[i].Priority, rows[i].code = d.SchedulingPriority, quotashare.ReasonCode(reason.Code)
			}
		}()
	}
	wg.Wait()
	if cf.output == "json" {
		if rows == nil {
			rows = []jobRow{}
		}
		return printJSON(stdout, rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(stdout, "no jobs")
		return nil
	}
	// 80 columns: ID 6 (the start of the id, which every JOB argument takes), NAME 14,
	// SHARE 8, STATE 9, PRIO 4, INSTANCES 11 (without the "ml." every SageMaker type
	// begins with), AGE 4, REASON 17.
	const format = "%-6s %-14s %-8s %-9s %4s %-11s %4s %s\n"
	fmt.Fprintf(stdout, format, "ID", "NAME", "SHARE", "STATE", "PRIO", "INSTANCES", "AGE", "REASON")
	for _, r := range rows {
		prio := "-"
		if r.Priority != nil {
			prio = strconv.Itoa(int(*r.Priority))
		}
		fmt.Fprintf(stdout, format, r.ID[:min(6, len(r.ID))], cut(r.Name, 14), cut(r.Share, 8), cut(r.State, 9), prio,
			cut(strings.ReplaceAll(r.Instances, " ml.", " "), 11), age(now.Sub(time.UnixMilli(r.CreatedAt))), cut(shortReason(r.State, r.code, r.Reason), 17))
	}
	return nil
}

// shortReason is the table's word for a reason, from its code: the code of a waiting job's
// reason, whether a running one borrows or is being preempted; an ended job's statusReason
// as it is (quotashare explain gives the sentences). A job without a code (a server
// before codes) shows its statusReason.
func shortReason(state string, code quotashare.ReasonCode, reason string) string {
	switch code {
	case quotashare.ReasonPreempting:
		return "preempting"
	case quotashare.ReasonTerminating:
		return "terminating"
	case quotashare.ReasonBorrowing:
		return "borrowing"
	case quotashare.ReasonOwnCapacity:
		return "own capacity"
	}
	if state == "RUNNABLE" && code != "" {
		return string(code)
	}
	return reason
}

// cut shortens s to n characters, marking the cut with "…".
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// age renders a duration in at most five characters: 42s, 17m, 5h, 3d.
func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(max(d, 0).Seconds())) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + "m"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d.Hours())) + "h"
	}
	return strconv.Itoa(int(d.Hours()/24)) + "d"
}

// queueOf is the queue a command works on: --queue, else $QUOTASHARE_QUEUE, else the one
// queue the server has. With none or several, the error says which to give.
func queueOf(cf *clientFlags, flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if q := os.Getenv("QUOTASHARE_QUEUE"); q != "" {
		return q, nil
	}
	names, err := queueNames(cf)
	if err != nil {
		return "", err
	}
	switch len(names) {
	case 1:
		return names[0], nil
	case 0:
		return "", errors.New("--queue: the server has no job queue yet (quotashare apply -f FILE makes one)")
	}
	return "", fmt.Errorf("--queue: the server has %d queues, give one of %s (or set QUOTASHARE_QUEUE)", len(names), strings.Join(names, ", "))
}

// queueNames lists the server's job queues by name, sorted.
func queueNames(cf *clientFlags) ([]string, error) {
	var names []string
	for p := batch.NewDescribeJobQueuesPaginator(cf.client(), &batch.DescribeJobQueuesInput{}); p.HasMorePages(); {
		page, err := p.NextPage(context.Background())
		if err != nil {
			return nil, cf.apiError(err)
		}
		for _, q := range page.JobQueues {
			names = append(names, aws.ToString(q.JobQueueName))
		}
	}
	slices.Sort(names)
	return names, nil
}
