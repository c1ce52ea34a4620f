package sched

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"github.com/quotashare/quotashare"
)

// TypeUsage is one share's numbers for one instance type.
type TypeUsage struct {
	InstanceType string
	Limit        int
	// InUse is U(s): held by active attempts and by attempts still stopping.
	InUse int
	// Stopping is the part of InUse held by attempts being stopped.
	Stopping int
	// Borrowed is max(0, InUse - Limit).
	Borrowed int
	// Idle is what a lending share owns and does not use (0 for RESERVE).
	Idle int
}

// ShareUsage is a share's usage snapshot.
type ShareUsage struct {
	Name     string
	Strategy quotashare.Strategy
	Waiting  int // RUNNABLE jobs
	Active   int // attempts holding capacity, stopping ones included
	Types    []TypeUsage
}

// CapacityUsage is the environment's numbers for one instance type.
type CapacityUsage struct {
	InstanceType string
	Capacity     int
	InUse        int
}

// Usage returns the usage of every share, by name, with the types it has a limit for or
// uses.
func (s *Scheduler) Usage() []ShareUsage {
	out := make([]ShareUsage, 0, len(s.order))
	byName := s.typesByName()
	for _, sh := range s.order {
		u := ShareUsage{Name: sh.cfg.Name, Strategy: sh.cfg.Strategy, Waiting: sh.queue.Len(), Active: sh.holding}
		for _, t := range byName {
			name := s.typeNames[t]
			if sh.limit[t] == 0 && sh.used[t] == 0 {
				continue
			}
			tu := TypeUsage{InstanceType: name, Limit: sh.limit[t], InUse: sh.used[t], Stopping: sh.stopping[t],
				Borrowed: max(0, sh.used[t]-sh.limit[t])}
			if sh.cfg.Strategy.Lends() {
				tu.Idle = max(0, sh.limit[t]-sh.used[t])
			}
			u.Types = append(u.Types, tu)
		}
		out = append(out, u)
	}
	return out
}

// Capacity returns the environment's limit and usage per instance type.
func (s *Scheduler) Capacity() []CapacityUsage {
	var out []CapacityUsage
	for _, t := range s.typesByName() {
		name := s.typeNames[t]
		if s.capacity[t] == 0 && s.used[t] == 0 {
			continue
		}
		out = append(out, CapacityUsage{InstanceType: name, Capacity: s.capacity[t], InUse: s.used[t]})
	}
	return out
}

// typesByName returns the type indices in the order of their names.
func (s *Scheduler) typesByName() []int {
	byName := make([]int, len(s.typeNames))
	for t := range byName {
		byName[t] = t
	}
	slices.SortFunc(byName, func(a, b int) int { return cmp.Compare(s.typeNames[a], s.typeNames[b]) })
	return byName
}

// Front returns the ids of up to n RUNNABLE jobs of a share in queue order (priority,
// then submission time, then id): the jobs its next pass looks at first.
func (s *Scheduler) Front(share string, n int) []string {
	sh := s.shares[share]
	if sh == nil || n <= 0 {
		return nil
	}
	out := make([]string, 0, min(n, sh.queue.Len()))
	sh.queue.Ascend(func(j *job) bool {
		out = append(out, j.id)
		return len(out) < n
	})
	return out
}

// Loan is what a borrowing share holds of a lending share's idle capacity of one type,
// as Loans attributes it.
type Loan struct {
	Lender, Borrower, InstanceType string
	Count                          int
}

// Loans attributes what LEND_AND_BORROW shares borrow to the lending shares' idle
// capacity, for display: borrowing draws on that capacity as one pool, so this is a
// convention, not a record the scheduler keeps. Borrowers, by name, take from the lenders
// with the most idle first, then by name. A share over a lowered limit that does not
// borrow is no borrower here.
func Loans(shares []ShareUsage) []Loan {
	type party struct {
		share string
		n     int
	}
	lenders, borrowers := map[string][]*party{}, map[string][]*party{}
	for _, s := range shares {
		for _, t := range s.Types {
			switch {
			case s.Strategy.Borrows() && t.Borrowed > 0:
				borrowers[t.InstanceType] = append(borrowers[t.InstanceType], &party{s.Name, t.Borrowed})
			case s.Strategy.Lends() && t.Limit > t.InUse:
				lenders[t.InstanceType] = append(lenders[t.InstanceType], &party{s.Name, t.Limit - t.InUse})
			}
		}
	}
	var loans []Loan
	for _, typ := range slices.Sorted(maps.Keys(borrowers)) {
		ls, bs := lenders[typ], borrowers[typ]
		slices.SortFunc(ls, func(a, b *party) int { return cmp.Or(b.n-a.n, strings.Compare(a.share, b.share)) })
		slices.SortFunc(bs, func(a, b *party) int { return strings.Compare(a.share, b.share) })
		for _, b := range bs {
			for _, l := range ls {
				if n := min(b.n, l.n); n > 0 {
					loans = append(loans, Loan{l.share, b.share, typ, n})
					b.n -= n
					l.n -= n
				}
			}
		}
	}
	return loans
}

// Borrower is an attempt that holds capacity above its share's limit, and how much.
type Borrower struct {
	JobID, Share string
	Borrowed     []quotashare.Demand
}

// Borrowers names the attempts on borrowed capacity: for each share and type, the part of
// its usage above its limit that no stopping attempt is freeing already
// (ShareUsage.Borrowed less what is stopping), laid on its active attempts in the
// published victim order, the attempts a reclaim would take first. Their counts add up
// to that part exactly. Shares in name order, then attempts in the order they are met.
func (s *Scheduler) Borrowers() []Borrower {
	var out []Borrower
	types := s.typesByName()
	for _, sh := range s.order {
		at := map[string]int{} // job id -> index in out
		for _, t := range types {
			rest := sh.used[t] - sh.stopping[t] - sh.limit[t]
			if rest <= 0 {
				continue
			}
			sh.actives[t].Ascend(func(j *job) bool {
				n := min(rest, j.holds(t))
				rest -= n
				i, ok := at[j.id]
				if !ok {
					i = len(out)
					at[j.id] = i
					out = append(out, Borrower{JobID: j.id, Share: sh.cfg.Name})
				}
				out[i].Borrowed = append(out[i].Borrowed, quotashare.Demand{InstanceType: s.typeNames[t], Count: n})
				return rest > 0
			})
		}
	}
	return out
}
