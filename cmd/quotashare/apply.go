package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/quotashare/quotashare/internal/batchapi"
	"github.com/quotashare/quotashare/internal/sdkx"
)

const applyUsage = `usage: quotashare apply -f SETUP.yaml [--dry-run]

Makes the server match a setup file: one service environment (instance types and counts),
one job queue with its scheduling policy, and the queue's quota shares. It creates what is
missing and updates what differs, in that order, and prints each change. A bad file is
refused with the line and the rule before anything changes. Shares the file does not name
are left as they are.

Example setup file (examples/three-projects.yaml):
  environment: {name: three-projects-env, capacity: {ml.g5.xlarge: 3}}
  queue: {name: three-projects, priority: 1, policy: three-projects-policy}
  shares:
    - {name: qs1, limits: {ml.g5.xlarge: 1}, strategy: LEND_AND_BORROW, borrowLimit: 200, inSharePreemption: true}
    - {name: qs2, limits: {ml.g5.xlarge: 1}, strategy: LEND}
    - {name: qs3, limits: {ml.g5.xlarge: 1}, strategy: RESERVE}

A share may also say minRunTime: 90s (quotashare's minimum run time before preemption:
a younger attempt is no victim of in-share preemption; 0s, the default, is AWS's
behaviour) and minRunTimeAgainstReclaim: true (nor of reclaim: an owner's job then waits
for a borrowing attempt to come of age, with the capacity free meanwhile held for it).

Example:
  quotashare apply -f examples/three-projects.yaml --dry-run
`

// current is what the server has of a setup's resources (nil where missing).
type current struct {
	policyARN string
	env       *types.ServiceEnvironmentDetail
	queue     *types.JobQueueDetail
	shares    map[string]types.QuotaShareDetail
	minRun    map[string]batchapi.MinRunTime // shares' minimum run times, by name
}

func readCurrent(ctx context.Context, c *batch.Client, s *setup) (*current, error) {
	cur := &current{shares: map[string]types.QuotaShareDetail{}}
	var arns []string
	for p := batch.NewListSchedulingPoliciesPaginator(c, &batch.ListSchedulingPoliciesInput{}); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, sp := range page.SchedulingPolicies {
			if strings.HasSuffix(aws.ToString(sp.Arn), "/"+s.Queue.Policy) {
				arns = append(arns, aws.ToString(sp.Arn))
			}
		}
	}
	if len(arns) > 0 {
		cur.policyARN = arns[0]
	}
	envs, err := c.DescribeServiceEnvironments(ctx, &batch.DescribeServiceEnvironmentsInput{ServiceEnvironments: []string{s.Environment.Name}})
	if err != nil {
		return nil, err
	}
	if len(envs.ServiceEnvironments) > 0 {
		cur.env = &envs.ServiceEnvironments[0]
	}
	qs, err := c.DescribeJobQueues(ctx, &batch.DescribeJobQueuesInput{JobQueues: []string{s.Queue.Name}})
	if err != nil {
		return nil, err
	}
	if len(qs.JobQueues) > 0 {
		cur.queue = &qs.JobQueues[0]
		shares, minRun, err := listShares(ctx, c, s.Queue.Name)
		if err != nil {
			return nil, err
		}
		for _, sh := range shares {
			cur.shares[aws.ToString(sh.QuotaShareName)] = sh
		}
		cur.minRun = minRun
	}
	return cur, nil
}

// listShares lists a queue's quota shares, and their minimum run times from the
// quotashareMinRunTime member the SDK decodes past (by share name; none for a share
// without one).
func listShares(ctx context.Context, c *batch.Client, queue string) ([]types.QuotaShareDetail, map[string]batchapi.MinRunTime, error) {
	var shares []types.QuotaShareDetail
	minRun := map[string]batchapi.MinRunTime{}
	for p := batch.NewListQuotaSharesPaginator(c, &batch.ListQuotaSharesInput{JobQueue: aws.String(queue)}); p.HasMorePages(); {
		var raw []byte
		page, err := p.NextPage(ctx, sdkx.KeepBody(&raw))
		if err != nil {
			return nil, nil, err
		}
		shares = append(shares, page.QuotaShares...)
		var members struct {
			QuotaShares []struct {
				Name       string               `json:"quotaShareName"`
				MinRunTime *batchapi.MinRunTime `json:"quotashareMinRunTime"`
			} `json:"quotaShares"`
		}
		if err := json.Unmarshal(raw, &members); err != nil {
			return nil, nil, fmt.Errorf("ListQuotaShares: %v", err)
		}
		for _, m := range members.QuotaShares {
			if m.MinRunTime != nil && m.MinRunTime.Seconds != nil {
				minRun[m.Name] = *m.MinRunTime
			}
		}
	}
	return shares, minRun, nil
}

func countsText(m map[string]int) string {
	var parts []string
	for _, t := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", t, m[t]))
	}
	return strings.Join(parts, ", ")
}

func envCounts(ls []types.CapacityLimit) map[string]int {
	m := map[string]int{}
	for _, l := range ls {
		m[aws.ToString(l.CapacityUnit)] = int(aws.ToInt32(l.MaxCapacity))
	}
	return m
}

func shareCounts(ls []types.QuotaShareCapacityLimit) map[string]int {
	m := map[string]int{}
	for _, l := range ls {
		m[aws.ToString(l.CapacityUnit)] = int(aws.ToInt32(l.MaxCapacity))
	}
	return m
}

func envLimits(m map[string]int) []types.CapacityLimit {
	var out []types.CapacityLimit
	for _, t := range slices.Sorted(maps.Keys(m)) {
		out = append(out, types.CapacityLimit{CapacityUnit: aws.String(t), MaxCapacity: aws.Int32(int32(m[t]))})
	}
	return out
}

func shareLimits(m map[string]int) []types.QuotaShareCapacityLimit {
	var out []types.QuotaShareCapacityLimit
	for _, t := range slices.Sorted(maps.Keys(m)) {
		out = append(out, types.QuotaShareCapacityLimit{CapacityUnit: aws.String(t), MaxCapacity: aws.Int32(int32(m[t]))})
	}
	return out
}

func inShareState(on bool) types.QuotaShareInSharePreemptionState {
	if on {
		return types.QuotaShareInSharePreemptionStateEnabled
	}
	return types.QuotaShareInSharePreemptionStateDisabled
}

// borrowText says a share's borrowing in words; the effective borrowLimit of a
// LEND_AND_BORROW share without one is -1 (unlimited).
func borrowOf(strategy string, b *int) string {
	if strategy != string(types.QuotaShareResourceSharingStrategyLendAndBorrow) {
		return strategy
	}
	if b == nil || *b == -1 {
		return strategy + " borrowLimit unlimited"
	}
	return fmt.Sprintf("%s borrowLimit %d%%", strategy, *b)
}

// change is one step of an apply: what it says, and what it does.
type change struct {
	text string
	do   func(context.Context, *batch.Client) error
	// preview is the change as POST /v1/previewchanges takes it, for the dry run (nil for
	// changes that preempt nothing: policies and queues).
	preview map[string]any
}

func wireLimits(m map[string]int) []map[string]any {
	var out []map[string]any
	for _, t := range slices.Sorted(maps.Keys(m)) {
		out = append(out, map[string]any{"capacityUnit": t, "maxCapacity": m[t]})
	}
	return out
}

func wireShare(sh shareSpec) map[string]any {
	rc := map[string]any{"strategy": sh.Strategy}
	if sh.BorrowLimit != nil {
		rc["borrowLimit"] = *sh.BorrowLimit
	} else if sh.Strategy == string(types.QuotaShareResourceSharingStrategyLendAndBorrow) {
		rc["borrowLimit"] = -1
	}
	q := map[string]any{"quotaShareName": sh.Name, "capacityLimits": wireLimits(sh.Limits),
		"resourceSharingConfiguration": rc, "preemptionConfiguration": map[string]any{"inSharePreemption": string(inShareState(sh.InSharePreemption))},
		"state": string(sh.stateOf())}
	maps.Copy(q, sh.minRunTimeMember())
	return map[string]any{"quotaShare": q}
}

// previewResult is what the server says a dry run's changes would do to running jobs.
type previewResult struct {
	Preemptions []struct{ JobID, JobName, QuotaShareName, Rule, Reason string } `json:"preemptions"`
	Preemptible []struct {
		JobID, JobName, QuotaShareName string
		Borrowed                       []struct {
			CapacityUnit string `json:"capacityUnit"`
			MaxCapacity  int    `json:"maxCapacity"`
		} `json:"borrowed"`
	} `json:"preemptible"`
}

// preview asks the server what the changes would do: its own scheduling pass run on a
// copy of the queue's state after each change, the same code that apply's requests run.
func preview(endpoint, queue string, cs []change) (*previewResult, error) {
	var changes []map[string]any
	for _, c := range cs {
		if c.preview != nil {
			changes = append(changes, c.preview)
		}
	}
	body, _ := json.Marshal(map[string]any{"jobQueue": queue, "changes": changes})
	req, err := signedRequest(http.MethodPost, strings.TrimRight(endpoint, "/")+"/v1/previewchanges", body)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("--endpoint %s: %w", endpoint, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		var e struct{ Message string }
		json.Unmarshal(data, &e)
		return nil, fmt.Errorf("previewing the changes: %s", e.Message)
	}
	var out previewResult
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("previewing the changes: %v", err)
	}
	return &out, nil
}

// plan compares the file with the server and lists the changes in the order they apply.
func plan(ctx context.Context, c *batch.Client, s *setup, cur *current, out io.Writer) ([]change, error) {
	var cs []change
	policyARN := cur.policyARN
	if policyARN == "" {
		cs = append(cs, change{"create scheduling policy " + s.Queue.Policy + " (quotaSharePolicy FIFO)", func(ctx context.Context, c *batch.Client) error {
			out, err := c.CreateSchedulingPolicy(ctx, &batch.CreateSchedulingPolicyInput{Name: aws.String(s.Queue.Policy),
				QuotaSharePolicy: &types.QuotaSharePolicy{IdleResourceAssignmentStrategy: types.QuotaShareIdleResourceAssignmentStrategyFifo}})
			if err == nil {
				policyARN = aws.ToString(out.Arn)
			}
			return err
		}, nil})
	}
	if cur.env == nil {
		cs = append(cs, change{fmt.Sprintf("create service environment %s: %s", s.Environment.Name, countsText(s.Environment.Capacity)), func(ctx context.Context, c *batch.Client) error {
			_, err := c.CreateServiceEnvironment(ctx, &batch.CreateServiceEnvironmentInput{ServiceEnvironmentName: aws.String(s.Environment.Name),
				ServiceEnvironmentType: types.ServiceEnvironmentTypeSagemakerTraining, CapacityLimits: envLimits(s.Environment.Capacity)})
			return err
		}, nil})
	} else if have := envCounts(cur.env.CapacityLimits); !maps.Equal(have, s.Environment.Capacity) {
		cs = append(cs, change{fmt.Sprintf("update service environment %s: capacity %s -> %s", s.Environment.Name, countsText(have), countsText(s.Environment.Capacity)),
			func(ctx context.Context, c *batch.Client) error {
				_, err := c.UpdateServiceEnvironment(ctx, &batch.UpdateServiceEnvironmentInput{ServiceEnvironment: aws.String(s.Environment.Name),
					CapacityLimits: envLimits(s.Environment.Capacity)})
				return err
			}, map[string]any{"capacityLimits": wireLimits(s.Environment.Capacity)}})
	}
	envOrder := []types.ServiceEnvironmentOrder{{Order: aws.Int32(1), ServiceEnvironment: aws.String(s.Environment.Name)}}
	if cur.queue == nil {
		cs = append(cs, change{fmt.Sprintf("create job queue %s (priority %d, policy %s, environment %s)", s.Queue.Name, s.Queue.Priority, s.Queue.Policy, s.Environment.Name),
			func(ctx context.Context, c *batch.Client) error {
				_, err := c.CreateJobQueue(ctx, &batch.CreateJobQueueInput{JobQueueName: aws.String(s.Queue.Name), Priority: aws.Int32(int32(s.Queue.Priority)),
					JobQueueType: types.JobQueueTypeSagemakerTraining, SchedulingPolicyArn: aws.String(policyARN), ServiceEnvironmentOrder: envOrder})
				return err
			}, nil})
	} else {
		var diffs []string
		if p := int(aws.ToInt32(cur.queue.Priority)); p != s.Queue.Priority {
			diffs = append(diffs, fmt.Sprintf("priority %d -> %d", p, s.Queue.Priority))
		}
		if cur.policyARN == "" || aws.ToString(cur.queue.SchedulingPolicyArn) != cur.policyARN {
			diffs = append(diffs, "policy -> "+s.Queue.Policy)
		}
		envChanged := len(cur.queue.ServiceEnvironmentOrder) != 1 || !strings.HasSuffix(aws.ToString(cur.queue.ServiceEnvironmentOrder[0].ServiceEnvironment), "/"+s.Environment.Name)
		if envChanged {
			diffs = append(diffs, "environment -> "+s.Environment.Name)
		}
		if len(diffs) > 0 {
			cs = append(cs, change{"update job queue " + s.Queue.Name + ": " + strings.Join(diffs, "; "), func(ctx context.Context, c *batch.Client) error {
				in := &batch.UpdateJobQueueInput{JobQueue: aws.String(s.Queue.Name), Priority: aws.Int32(int32(s.Queue.Priority)), SchedulingPolicyArn: aws.String(policyARN)}
				if envChanged {
					in.ServiceEnvironmentOrder = envOrder
				}
				_, err := c.UpdateJobQueue(ctx, in)
				return err
			}, nil})
		}
	}
	for _, sh := range s.Shares {
		have, exists := cur.shares[sh.Name]
		limits, strategy := shareLimits(sh.Limits), types.QuotaShareResourceSharingStrategy(sh.Strategy)
		rc := &types.QuotaShareResourceSharingConfiguration{Strategy: strategy}
		if sh.BorrowLimit != nil {
			rc.BorrowLimit = aws.Int32(int32(*sh.BorrowLimit))
		} else if sh.Strategy == string(types.QuotaShareResourceSharingStrategyLendAndBorrow) {
			rc.BorrowLimit = aws.Int32(-1)
		}
		pc := &types.QuotaSharePreemptionConfiguration{InSharePreemption: inShareState(sh.InSharePreemption)}
		if !exists {
			text := fmt.Sprintf("create quota share %s: %s, %s, in-share preemption %s", sh.Name, countsText(sh.Limits),
				borrowOf(sh.Strategy, sh.BorrowLimit), onOff(sh.InSharePreemption))
			if sh.MinRunTime > 0 {
				text += ", minimum run time " + minRunTimeText(sh.MinRunTime, sh.MinRunTimeAgainstReclaim)
			}
			if sh.Disabled {
				text += ", DISABLED"
			}
			cs = append(cs, change{text, func(ctx context.Context, c *batch.Client) error {
				_, err := c.CreateQuotaShare(ctx, &batch.CreateQuotaShareInput{QuotaShareName: aws.String(sh.Name), JobQueue: aws.String(s.Queue.Name),
					CapacityLimits: limits, ResourceSharingConfiguration: rc, PreemptionConfiguration: pc, State: sh.stateOf()},
					sdkx.WithMembers(sh.minRunTimeMember()))
				return err
			}, wireShare(sh)})
			continue
		}
		var diffs []string
		old := shareCounts(have.CapacityLimits)
		if !maps.Equal(old, sh.Limits) {
			diffs = append(diffs, fmt.Sprintf("limits %s -> %s", countsText(old), countsText(sh.Limits)))
		}
		var oldBorrow *int
		if b := have.ResourceSharingConfiguration.BorrowLimit; b != nil {
			v := int(*b)
			oldBorrow = &v
		}
		if was, now := borrowOf(string(have.ResourceSharingConfiguration.Strategy), oldBorrow), borrowOf(sh.Strategy, sh.BorrowLimit); was != now {
			diffs = append(diffs, was+" -> "+now)
		}
		if was := have.PreemptionConfiguration.InSharePreemption == types.QuotaShareInSharePreemptionStateEnabled; was != sh.InSharePreemption {
			diffs = append(diffs, "in-share preemption "+onOff(was)+" -> "+onOff(sh.InSharePreemption))
		}
		had := cur.minRun[sh.Name]
		if was, now := minRunTimeText(int(aws.ToInt32(had.Seconds)), had.AgainstReclaim), minRunTimeText(sh.MinRunTime, sh.MinRunTimeAgainstReclaim); was != now {
			diffs = append(diffs, "minimum run time "+was+" -> "+now)
		}
		if have.State != sh.stateOf() {
			diffs = append(diffs, fmt.Sprintf("state %s -> %s", have.State, sh.stateOf()))
		}
		if len(diffs) == 0 {
			continue
		}
		text := "update quota share " + sh.Name + ": " + strings.Join(diffs, "; ")
		lowered, err := lowered(ctx, c, s.Queue.Name, sh, old)
		if err != nil {
			return nil, err
		}
		text += lowered
		arn := aws.ToString(have.QuotaShareArn)
		cs = append(cs, change{text, func(ctx context.Context, c *batch.Client) error {
			_, err := c.UpdateQuotaShare(ctx, &batch.UpdateQuotaShareInput{QuotaShareArn: aws.String(arn), CapacityLimits: limits,
				ResourceSharingConfiguration: rc, PreemptionConfiguration: pc, State: sh.stateOf()}, sdkx.WithMembers(sh.minRunTimeMember()))
			return err
		}, wireShare(sh)})
	}
	for _, name := range slices.Sorted(maps.Keys(cur.shares)) {
		if !slices.ContainsFunc(s.Shares, func(sh shareSpec) bool { return sh.Name == name }) {
			fmt.Fprintf(out, "note: quota share %s is not in the file; apply leaves it as it is\n", name)
		}
	}
	return cs, nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// lowered says, for a share whose limit goes down, which of its running jobs become
// eligible for preemption: those holding the usage above the new limit.
func lowered(ctx context.Context, c *batch.Client, queue string, sh shareSpec, old map[string]int) (string, error) {
	use := map[string]int{}
	holders := map[string][]string{}
	for _, st := range []types.ServiceJobStatus{types.ServiceJobStatusScheduled, types.ServiceJobStatusStarting, types.ServiceJobStatusRunning} {
		p := batch.NewListServiceJobsPaginator(c, &batch.ListServiceJobsInput{JobQueue: aws.String(queue), JobStatus: st,
			Filters: []types.KeyValuesPair{{Name: aws.String("QUOTA_SHARE_NAME"), Values: []string{sh.Name}}}})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return "", err
			}
			for _, j := range page.JobSummaryList {
				for _, u := range j.CapacityUsage {
					t := aws.ToString(u.CapacityUnit)
					use[t] += int(aws.ToFloat64(u.Quantity))
					holders[t] = append(holders[t], aws.ToString(j.JobName))
				}
			}
		}
	}
	var parts []string
	for _, t := range slices.Sorted(maps.Keys(use)) {
		if limit := sh.Limits[t]; limit < old[t] && use[t] > limit {
			parts = append(parts, fmt.Sprintf("%d %s in use is %d over the new limit of %d: running jobs %s become eligible for preemption when an owner needs the capacity",
				use[t], t, use[t]-limit, limit, strings.Join(holders[t], ", ")))
		}
	}
	if len(parts) == 0 {
		return "", nil
	}
	return "\n    " + strings.Join(parts, "\n    "), nil
}

// overcommitted says, per instance type in name order, where the shares' limits add up to
// more than the environment's capacity: allowed (AWS allows it), but then a share cannot
// always get its limit.
func overcommitted(s *setup) []string {
	sum := map[string]int{}
	for _, sh := range s.Shares {
		for t, n := range sh.Limits {
			sum[t] += n
		}
	}
	var out []string
	for _, t := range slices.Sorted(maps.Keys(sum)) {
		if c := s.Environment.Capacity[t]; sum[t] > c {
			out = append(out, fmt.Sprintf("the shares' limits of %s add up to %d, more than the environment's capacity of %d: "+
				"a share cannot always get its limit. When every share claims its own, the allocations compete first come, "+
				"first served, and a job within its share's limit may wait for capacity that no reclaim can free", t, sum[t], c))
		}
	}
	return out
}

func applyCmd(args []string, stdout, stderr io.Writer) error {
	fs, cf := newFlags("apply", applyUsage, stderr)
	file := fs.String("f", "", "the setup file (YAML)")
	dry := fs.Bool("dry-run", false, "print the changes without making them, and the preemptions the server would make for them")
	if err := fs.Parse(reorder(fs, args)); err != nil {
		return err
	}
	if err := cf.check(); err != nil {
		return err
	}
	if *file == "" || fs.NArg() != 0 {
		fs.Usage()
		return errors.New("apply takes -f SETUP.yaml and no arguments")
	}
	data, err := os.ReadFile(*file)
	if err != nil {
		return err
	}
	s, err := parseSetup(*file, data)
	if err != nil {
		return err
	}
	warnings := overcommitted(s)
	if cf.output == "table" {
		for _, w := range warnings {
			fmt.Fprintf(stderr, "warning: %s: %s\n", *file, w)
		}
	}
	ctx := context.Background()
	c := cf.client()
	cur, err := readCurrent(ctx, c, s)
	if err != nil {
		return cf.apiError(err)
	}
	changes, err := plan(ctx, c, s, cur, stdout)
	if err != nil {
		return cf.apiError(err)
	}
	var pv *previewResult
	if *dry && cur.queue != nil && len(changes) > 0 {
		if pv, err = preview(cf.endpoint, s.Queue.Name, changes); err != nil {
			return err
		}
	}
	done := []string{}
	for _, ch := range changes {
		if !*dry {
			if err := ch.do(ctx, c); err != nil {
				return fmt.Errorf("%s: %w", ch.text, cf.apiError(err))
			}
		}
		done = append(done, ch.text)
		if cf.output == "table" {
			if *dry {
				fmt.Fprintln(stdout, "would "+ch.text)
			} else {
				fmt.Fprintln(stdout, ch.text)
			}
		}
	}
	if pv != nil && cf.output == "table" {
		for _, p := range pv.Preemptions {
			fmt.Fprintf(stdout, "would preempt %s (%s, share %s) at once, rule %s: %s\n", p.JobName, p.JobID, p.QuotaShareName, p.Rule, p.Reason)
		}
		for _, p := range pv.Preemptible {
			var parts []string
			for _, b := range p.Borrowed {
				parts = append(parts, fmt.Sprintf("%d %s", b.MaxCapacity, b.CapacityUnit))
			}
			fmt.Fprintf(stdout, "would leave %s (%s, share %s) running on %s of borrowed capacity: preemptible when an owner needs it\n",
				p.JobName, p.JobID, p.QuotaShareName, strings.Join(parts, ", "))
		}
	}
	switch {
	case cf.output == "json":
		out := map[string]any{"dryRun": *dry, "changes": done}
		if len(warnings) > 0 {
			out["warnings"] = warnings
		}
		if pv != nil {
			out["preemptions"], out["preemptible"] = pv.Preemptions, pv.Preemptible
		}
		return printJSON(stdout, out)
	case len(changes) == 0:
		fmt.Fprintln(stdout, "no changes: the server matches "+*file)
	case *dry:
		fmt.Fprintln(stdout, "dry run: nothing was changed")
	}
	return nil
}

const exportUsage = `usage: quotashare export --queue QUEUE

Writes a queue's setup (environment, queue, policy, shares) as a file apply reads (with
--output json, the same as JSON).

Example:
  quotashare export --queue three-projects > setup.yaml
`

func exportCmd(args []string, stdout, stderr io.Writer) error {
	fs, cf := newFlags("export", exportUsage, stderr)
	queue := fs.String("queue", "", queueHelp)
	if err := parseCommand(fs, args, cf, 0, "no arguments"); err != nil {
		return err
	}
	name, err := queueOf(cf, *queue)
	if err != nil {
		return err
	}
	*queue = name
	ctx := context.Background()
	c := cf.client()
	qs, err := c.DescribeJobQueues(ctx, &batch.DescribeJobQueuesInput{JobQueues: []string{*queue}})
	if err != nil {
		return cf.apiError(err)
	}
	if len(qs.JobQueues) == 0 {
		return fmt.Errorf("--queue: job queue %s does not exist", *queue)
	}
	q := qs.JobQueues[0]
	var s setup
	s.Queue.Name, s.Queue.Priority = aws.ToString(q.JobQueueName), int(aws.ToInt32(q.Priority))
	s.Queue.Policy = nameAfterSlash(aws.ToString(q.SchedulingPolicyArn))
	s.Environment.Name = nameAfterSlash(aws.ToString(q.ServiceEnvironmentOrder[0].ServiceEnvironment))
	envs, err := c.DescribeServiceEnvironments(ctx, &batch.DescribeServiceEnvironmentsInput{ServiceEnvironments: []string{s.Environment.Name}})
	if err != nil {
		return cf.apiError(err)
	}
	if len(envs.ServiceEnvironments) == 1 {
		s.Environment.Capacity = envCounts(envs.ServiceEnvironments[0].CapacityLimits)
	}
	shares, minRun, err := listShares(ctx, c, *queue)
	if err != nil {
		return cf.apiError(err)
	}
	for _, sh := range shares {
		spec := shareSpec{Name: aws.ToString(sh.QuotaShareName), Limits: shareCounts(sh.CapacityLimits),
			Strategy:          string(sh.ResourceSharingConfiguration.Strategy),
			InSharePreemption: sh.PreemptionConfiguration.InSharePreemption == types.QuotaShareInSharePreemptionStateEnabled,
			Disabled:          sh.State == types.QuotaShareStateDisabled}
		if b := sh.ResourceSharingConfiguration.BorrowLimit; b != nil && *b != -1 && spec.Strategy == string(types.QuotaShareResourceSharingStrategyLendAndBorrow) {
			v := int(*b)
			spec.BorrowLimit = &v
		}
		if m, ok := minRun[spec.Name]; ok {
			spec.MinRunTime, spec.MinRunTimeAgainstReclaim = int(aws.ToInt32(m.Seconds)), m.AgainstReclaim
		}
		s.Shares = append(s.Shares, spec)
	}
	if cf.output == "json" {
		return printJSON(stdout, s)
	}
	_, err = io.WriteString(stdout, s.render())
	return err
}

func nameAfterSlash(arn string) string { return arn[strings.LastIndex(arn, "/")+1:] }
