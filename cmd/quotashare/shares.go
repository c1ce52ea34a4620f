package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/batchapi"
	"github.com/quotashare/quotashare/internal/sched"
)

// shareView is one share with its numbers, for shares and watch.
type shareView struct {
	batchapi.ShareNumbers
	Strategy string `json:"strategy"`
	State    string `json:"state"`
	// Lent is, by instance type, what borrowers hold of the share's unused capacity, as
	// the table's LENT column attributes it.
	Lent map[string]int `json:"lent,omitempty"`
	// LentTo says to whom, as the attribution gives it.
	LentTo []loan `json:"lentTo,omitempty"`
}

// readShares reads a queue's shares (ListQuotaShares) and their numbers (the
// quotashareShares member of GetJobQueueSnapshot, read over plain HTTP since the SDK
// drops members it does not know).
func readShares(cf *clientFlags, queue string) ([]shareView, error) {
	ctx := context.Background()
	strategy := map[string][2]string{}
	for p := batch.NewListQuotaSharesPaginator(cf.client(), &batch.ListQuotaSharesInput{JobQueue: aws.String(queue)}); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, cf.apiError(err)
		}
		for _, s := range page.QuotaShares {
			strategy[aws.ToString(s.QuotaShareName)] = [2]string{string(s.ResourceSharingConfiguration.Strategy), string(s.State)}
		}
	}
	body, _ := json.Marshal(map[string]string{"jobQueue": queue})
	req, err := signedRequest(http.MethodPost, strings.TrimRight(cf.endpoint, "/")+"/v1/getjobqueuesnapshot", body)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, cf.apiError(err)
	}
	defer resp.Body.Close()
	var snap struct {
		Message string                  `json:"message"`
		Shares  []batchapi.ShareNumbers `json:"quotashareShares"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
		return nil, fmt.Errorf("GetJobQueueSnapshot: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, errors.New(snap.Message)
	}
	var out []shareView
	for _, n := range snap.Shares {
		st := strategy[n.QuotaShareName]
		out = append(out, shareView{ShareNumbers: n, Strategy: st[0], State: st[1]})
	}
	return out, nil
}

// loan is an attributed loan: borrower holds n of lender's unused capacity of a type.
type loan struct {
	Lender   string `json:"lender"`
	Borrower string `json:"borrower"`
	Type     string `json:"instanceType"`
	N        int    `json:"count"`
}

// lent attributes what is borrowed to the lenders' unused capacity, as the server's
// metrics do (sched.Loans: a convention for display, since borrowing draws on one pool).
// It returns the loans, and what each share lent by type.
func lent(shares []shareView) ([]loan, map[string]map[string]int) {
	var usage []sched.ShareUsage
	for _, s := range shares {
		u := sched.ShareUsage{Name: s.QuotaShareName, Strategy: quotashare.Strategy(s.Strategy)}
		for _, t := range s.Types {
			u.Types = append(u.Types, sched.TypeUsage{InstanceType: t.CapacityUnit, Limit: t.Limit, InUse: t.InUse, Borrowed: t.Borrowed})
		}
		usage = append(usage, u)
	}
	var loans []loan
	byShare := map[string]map[string]int{}
	for _, l := range sched.Loans(usage) {
		loans = append(loans, loan{l.Lender, l.Borrower, l.InstanceType, l.Count})
		if byShare[l.Lender] == nil {
			byShare[l.Lender] = map[string]int{}
		}
		byShare[l.Lender][l.InstanceType] += l.Count
	}
	return loans, byShare
}

// printShares renders the shares table in 80 columns: a line per share and instance type.
func printShares(w io.Writer, shares []shareView) {
	const format = "%-10s %-15s %-12s %5s %6s %8s %4s %6s %6s\n"
	fmt.Fprintf(w, format, "SHARE", "STRATEGY", "TYPE", "LIMIT", "IN USE", "BORROWED", "LENT", "UNUSED", "QUEUED")
	loans, lentOut := lent(shares)
	var over []string
	for _, s := range shares {
		name, strategy, queued := cut(s.QuotaShareName, 10), s.Strategy, fmt.Sprint(s.Waiting)
		if s.State == "DISABLED" {
			strategy += "*"
		}
		for _, t := range s.Types {
			l := lentOut[s.QuotaShareName][t.CapacityUnit]
			unused := max(0, t.Limit-t.InUse-l)
			b := fmt.Sprint(t.Borrowed)
			if t.Borrowed > 0 && s.Strategy != "LEND_AND_BORROW" {
				// It does not borrow: its jobs hold more than a lowered limit.
				b = "over " + fmt.Sprint(t.Borrowed)
				over = append(over, fmt.Sprintf("%s holds %d %s above its lowered limit of %d", s.QuotaShareName, t.Borrowed, t.CapacityUnit, t.Limit))
			}
			fmt.Fprintf(w, format, name, strategy, cut(strings.TrimPrefix(t.CapacityUnit, "ml."), 12), fmt.Sprint(t.Limit), fmt.Sprint(t.InUse), b,
				fmt.Sprint(l), fmt.Sprint(unused), queued)
			name, strategy, queued = "", "", ""
		}
	}
	for _, o := range over {
		fmt.Fprintf(w, "over limit: %s\n", o)
	}
	for _, l := range loans {
		fmt.Fprintf(w, "lent: %s's %d %s to %s\n", l.Lender, l.N, l.Type, l.Borrower)
	}
	if len(loans) > 0 {
		fmt.Fprintln(w, "LENT: held by borrowers (lending is one pool, shown on the largest lenders)")
	}
	for _, s := range shares {
		if s.State == "DISABLED" {
			fmt.Fprintln(w, "* DISABLED: takes no new jobs; its jobs go on")
			break
		}
	}
}

const sharesUsage = `usage: quotashare shares --queue QUEUE [flags]

Shows each quota share of a queue, per instance type (without the "ml." prefix): its
limit, what its jobs hold (IN USE, attempts still stopping included), how much of that is
BORROWED ("over N" for a share that does not borrow and holds more than a lowered limit),
how much of its own allocation borrowers hold (LENT), how much is left UNUSED (lendable by
LEND and LEND_AND_BORROW shares, kept idle by RESERVE ones), and how many of its jobs wait
(QUEUED). Borrowing draws on the lenders' unused capacity as one pool: LENT shows it
against the lenders with the most unused first.

Example:
  quotashare shares --queue three-projects
`

func sharesCmd(args []string, stdout, stderr io.Writer) error {
	fs, cf := newFlags("shares", sharesUsage, stderr)
	queue := fs.String("queue", "", queueHelp)
	if err := parseCommand(fs, args, cf, 0, "no arguments"); err != nil {
		return err
	}
	queues := []string{*queue}
	if *queue == "" {
		if q := os.Getenv("QUOTASHARE_QUEUE"); q != "" {
			queues[0] = q
		} else { // every queue's shares
			names, err := queueNames(cf)
			if err != nil {
				return err
			}
			if len(names) == 0 {
				return errors.New("--queue: the server has no job queue yet (quotashare apply -f FILE makes one)")
			}
			queues = names
		}
	}
	if len(queues) > 1 && cf.output != "json" {
		for i, q := range queues {
			if i > 0 {
				fmt.Fprintln(stdout)
			}
			fmt.Fprintf(stdout, "queue %s\n", q)
			shares, err := readShares(cf, q)
			if err != nil {
				return err
			}
			printShares(stdout, shares)
		}
		return nil
	}
	var shares []shareView
	for _, q := range queues {
		s, err := readShares(cf, q)
		if err != nil {
			return err
		}
		shares = append(shares, s...)
	}
	if cf.output == "json" {
		if shares == nil {
			shares = []shareView{}
		}
		loans, l := lent(shares)
		for i := range shares {
			shares[i].Lent = l[shares[i].QuotaShareName]
			for _, ln := range loans {
				if ln.Lender == shares[i].QuotaShareName {
					shares[i].LentTo = append(shares[i].LentTo, ln)
				}
			}
		}
		return printJSON(stdout, shares)
	}
	printShares(stdout, shares)
	return nil
}

const watchUsage = `usage: quotashare watch --queue QUEUE [flags]

The shares table, redrawn every --interval until Ctrl-C.

Example:
  quotashare watch --queue three-projects --interval 1s
`

func watchCmd(args []string, stdout, stderr io.Writer) error {
	fs, cf := newFlags("watch", watchUsage, stderr)
	queue := fs.String("queue", "", queueHelp)
	interval := fs.Duration("interval", 2*time.Second, "time between redraws")
	times := fs.Int("times", 0, "stop after this many redraws (0: never)")
	if err := parseCommand(fs, args, cf, 0, "no arguments"); err != nil {
		return err
	}
	q, err := queueOf(cf, *queue)
	if err != nil {
		return err
	}
	*queue = q
	if *interval < 100*time.Millisecond {
		return fmt.Errorf("--interval: %s is less than 100ms", *interval)
	}
	for n := 1; ; n++ {
		shares, err := readShares(cf, *queue)
		if err != nil {
			return err
		}
		fmt.Fprint(stdout, "\x1b[H\x1b[2J") // home, clear the screen
		fmt.Fprintf(stdout, "%s  queue %s  (every %s; Ctrl-C stops)\n\n", time.Now().Format("15:04:05"), *queue, *interval)
		printShares(stdout, shares)
		if *times > 0 && n >= *times {
			return nil
		}
		time.Sleep(*interval)
	}
}
