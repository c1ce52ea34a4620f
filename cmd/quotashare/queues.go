package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
)

const queuesUsage = `usage: quotashare queues

Lists the server's job queues: each one's priority, state, scheduling policy, service
environment and number of quota shares.

Example:
  quotashare queues --output json
`

// queueRow is one line of the queues table, and one object of its JSON.
type queueRow struct {
	Name        string `json:"jobQueueName"`
	Priority    int32  `json:"priority"`
	State       string `json:"state"`
	Status      string `json:"status"`
	Policy      string `json:"schedulingPolicy,omitempty"`
	Environment string `json:"serviceEnvironment,omitempty"`
	Shares      int    `json:"quotaShares"`
}

func queuesCmd(args []string, stdout, stderr io.Writer) error {
	fs, cf := newFlags("queues", queuesUsage, stderr)
	if err := parseCommand(fs, args, cf, 0, "no arguments"); err != nil {
		return err
	}
	ctx := context.Background()
	c := cf.client()
	var rows []queueRow
	for p := batch.NewDescribeJobQueuesPaginator(c, &batch.DescribeJobQueuesInput{}); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return cf.apiError(err)
		}
		for _, q := range page.JobQueues {
			r := queueRow{Name: aws.ToString(q.JobQueueName), Priority: aws.ToInt32(q.Priority), State: string(q.State), Status: string(q.Status),
				Policy: nameAfterSlash(aws.ToString(q.SchedulingPolicyArn))}
			if len(q.ServiceEnvironmentOrder) > 0 {
				r.Environment = nameAfterSlash(aws.ToString(q.ServiceEnvironmentOrder[0].ServiceEnvironment))
			}
			if q.SchedulingPolicyArn != nil {
				shares, _, err := listShares(ctx, c, r.Name)
				if err != nil {
					return cf.apiError(err)
				}
				r.Shares = len(shares)
			}
			rows = append(rows, r)
		}
	}
	slices.SortFunc(rows, func(a, b queueRow) int { return strings.Compare(a.Name, b.Name) })
	if cf.output == "json" {
		if rows == nil {
			rows = []queueRow{}
		}
		return printJSON(stdout, rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(stdout, "no job queues: quotashare apply -f FILE makes one")
		return nil
	}
	const format = "%-20s %4s %-8s %-20s %-20s %6s\n"
	fmt.Fprintf(stdout, format, "QUEUE", "PRIO", "STATE", "POLICY", "ENVIRONMENT", "SHARES")
	for _, r := range rows {
		fmt.Fprintf(stdout, format, r.Name, fmt.Sprint(r.Priority), r.State, dash(r.Policy), dash(r.Environment), fmt.Sprint(r.Shares))
	}
	return nil
}

// dash is a table cell: "-" for nothing.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
