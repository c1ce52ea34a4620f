// Package sim runs scenario scripts against a scheduling core and renders what it
// decided: every input line, and after each plan the decisions, the reason of every
// waiting job and the usage of every share. `quotashare simulate` runs it on the real
// scheduler; the core's golden tests run it on both the fast scheduler and the reference
// one (internal/schedtest) and compare.
package sim

import (
	"bufio"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/sched"
)

// Core is the event and plan surface of a scheduler.
type Core interface {
	SetCapacity(limits []quotashare.Demand) error
	SetShare(cfg sched.Share) error
	RemoveShare(name string) error
	Submit(j sched.Job) error
	SetPriority(id string, priority int) error
	Running(id string, at time.Time) error
	Remove(id string) error
	Stopping(id string) error
	Stopped(id string, requeue bool, now time.Time) error
	Plan(now time.Time) sched.Plan
	Reason(id string) (sched.Reason, bool)
	Usage() []sched.ShareUsage
}

var _ Core = (*sched.Scheduler)(nil)

// Run executes a scenario script against c and returns the transcript: every input line,
// and after each plan the decisions, the reason of every waiting job and the usage of
// every share.
//
// The script language, one command a line ('#' starts a comment):
//
//	capacity TYPE=N ...
//	share NAME STRATEGY TYPE=N ... [borrow=P] [inshare] [disabled] [minrun=S [minrun-reclaim]]
//	remove-share NAME
//	submit ID SHARE TYPE=N ... [prio=P] [at=T]
//	priority ID P
//	running ID [at=T]
//	stopping ID
//	stopped ID [requeue] [at=T]     (the attempt's processes are gone)
//	remove ID
//	plan [at=T]
//
// Times are seconds; a command without at= happens one second after the previous one.
func Run(c Core, script string) (string, error) {
	var out strings.Builder
	var order []string
	clock := int64(0)
	sc := bufio.NewScanner(strings.NewReader(script))
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		if i := strings.Index(line, "#"); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			if strings.TrimSpace(sc.Text()) != "" {
				out.WriteString(strings.TrimRight(sc.Text(), " ") + "\n")
			} else {
				out.WriteString("\n")
			}
			continue
		}
		out.WriteString(strings.Join(f, " ") + "\n")
		args, opts, flags, err := parseArgs(f[1:])
		if err != nil {
			return out.String(), fmt.Errorf("line %d: %v", lineNo, err)
		}
		clock++
		if at, ok := opts["at"]; ok {
			clock = at
		}
		now := time.Unix(clock, 0)
		need := func(n int) error {
			if len(args) < n {
				return fmt.Errorf("line %d: %s needs %d arguments", lineNo, f[0], n)
			}
			return nil
		}
		var cerr error
		switch f[0] {
		case "capacity":
			cerr = c.SetCapacity(demands(opts))
		case "share":
			if err := need(2); err != nil {
				return out.String(), err
			}
			bl := -1
			if v, ok := opts["borrow"]; ok {
				bl = int(v)
			}
			cerr = c.SetShare(sched.Share{Name: args[0], Strategy: quotashare.Strategy(args[1]), Limits: demands(opts),
				BorrowLimit: bl, InSharePreemption: flags["inshare"], Disabled: flags["disabled"],
				MinRunTime: time.Duration(opts["minrun"]) * time.Second, MinRunTimeAgainstReclaim: flags["minrun-reclaim"]})
		case "remove-share":
			if err := need(1); err != nil {
				return out.String(), err
			}
			cerr = c.RemoveShare(args[0])
		case "submit":
			if err := need(2); err != nil {
				return out.String(), err
			}
			cerr = c.Submit(sched.Job{ID: args[0], Share: args[1], Priority: int(opts["prio"]), Need: demands(opts), SubmittedAt: now})
			if cerr == nil {
				order = append(order, args[0])
			}
		case "priority":
			if err := need(2); err != nil {
				return out.String(), err
			}
			p, err := strconv.Atoi(args[1])
			if err != nil {
				return out.String(), fmt.Errorf("line %d: priority: %v", lineNo, err)
			}
			cerr = c.SetPriority(args[0], p)
		case "running":
			if err := need(1); err != nil {
				return out.String(), err
			}
			cerr = c.Running(args[0], now)
		case "stopping":
			if err := need(1); err != nil {
				return out.String(), err
			}
			cerr = c.Stopping(args[0])
		case "stopped":
			if err := need(1); err != nil {
				return out.String(), err
			}
			cerr = c.Stopped(args[0], flags["requeue"], now)
		case "remove":
			if err := need(1); err != nil {
				return out.String(), err
			}
			cerr = c.Remove(args[0])
		case "plan":
			p := c.Plan(now)
			writePlan(&out, c, p, order)
		default:
			return out.String(), fmt.Errorf("line %d: unknown command %q", lineNo, f[0])
		}
		if cerr != nil {
			fmt.Fprintf(&out, "  error: %v\n", cerr)
		}
	}
	return out.String(), sc.Err()
}

func parseArgs(f []string) (args []string, opts map[string]int64, flags map[string]bool, err error) {
	opts, flags = map[string]int64{}, map[string]bool{}
	for _, a := range f {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			if a == "inshare" || a == "disabled" || a == "requeue" || a == "minrun-reclaim" {
				flags[a] = true
			} else {
				args = append(args, a)
			}
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%s: %v", a, err)
		}
		opts[k] = n
	}
	return args, opts, flags, nil
}

// demands picks the TYPE=N options (those whose key has a dot) in name order.
func demands(opts map[string]int64) []quotashare.Demand {
	var ds []quotashare.Demand
	for k, v := range opts {
		if strings.Contains(k, ".") {
			ds = append(ds, quotashare.Demand{InstanceType: k, Count: int(v)})
		}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i].InstanceType < ds[j].InstanceType })
	return ds
}

func writePlan(out *strings.Builder, c Core, p sched.Plan, order []string) {
	for _, s := range p.Starts {
		fmt.Fprintf(out, "  start %s (%s)", s.JobID, s.Share)
		for _, d := range s.Borrowed {
			fmt.Fprintf(out, " borrowing %s", d)
		}
		out.WriteString("\n")
	}
	for _, pr := range p.Preemptions {
		fmt.Fprintf(out, "  preempt %s (%s) rule=%s", pr.JobID, pr.Share, pr.Rule)
		if pr.ForJob != "" {
			fmt.Fprintf(out, " for=%s (%s)", pr.ForJob, pr.ForShare)
		}
		fmt.Fprintf(out, "\n    %s\n", pr.Reason)
	}
	for _, id := range order {
		if r, ok := c.Reason(id); ok {
			fmt.Fprintf(out, "  wait %s: %s\n", id, r)
		}
	}
	if !p.WakeAt.IsZero() {
		fmt.Fprintf(out, "  wake at=%d\n", p.WakeAt.Unix())
	}
	for _, u := range c.Usage() {
		fmt.Fprintf(out, "  usage %s: waiting %d, holding %d", u.Name, u.Waiting, u.Active)
		for _, t := range u.Types {
			fmt.Fprintf(out, "; %s %d/%d", t.InstanceType, t.InUse, t.Limit)
			if t.Borrowed > 0 {
				fmt.Fprintf(out, " borrowed %d", t.Borrowed)
			}
			if t.Stopping > 0 {
				fmt.Fprintf(out, " stopping %d", t.Stopping)
			}
		}
		out.WriteString("\n")
	}
}
