package control

// Lists: jobs by queue, share, state and name, a page at a time, and the queue snapshot.

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/sched"
)

// ListFilter is ListServiceJobs' request, already checked for shape.
type ListFilter struct {
	Queue  string
	Status quotashare.JobStatus
	// Filter is the one filter's name and values (JOB_NAME, QUOTA_SHARE_NAME,
	// BEFORE_CREATED_AT, AFTER_CREATED_AT), if any.
	Filter string
	Values []string
}

// ListJobs returns the jobs that match, newest first, up to max of them, and where to go
// on from (0 at the end). from is 0 for the newest job, or a value ListJobs returned: the
// creation time, in Unix nanoseconds, of the next job to look at. It stays valid while
// jobs are submitted and removed between pages; submission times are distinct, so a page
// neither skips nor repeats a job. Every query is answered from an index (index.go), never
// by a scan of the queue's history.
func (st *State) ListJobs(f ListFilter, from int64, limit int) ([]quotashare.Job, int64, error) {
	if f.Queue == "" {
		return nil, 0, invalid("jobQueue: is required")
	}
	match, err := jobMatcher(f)
	if err != nil {
		return nil, 0, err
	}
	qs, err := st.queueNamed(f.Queue)
	if err != nil {
		return nil, 0, err
	}
	status := f.Status
	if status == "" {
		status = quotashare.Running
	}
	n := limit + 1 // one more: where the next page begins
	var found []*quotashare.Job
	switch f.Filter {
	case "":
		found = descend(qs.index.byStatus[status], from, n, nil, nil)
	case "QUOTA_SHARE_NAME":
		v := f.Values[0]
		if f.Status != "" {
			found = descend(qs.index.byShareStatus[shareStatus{v, f.Status}], from, n, nil, nil)
			break
		}
		var lists [][]*quotashare.Job
		for k, t := range qs.index.byShareStatus {
			if k.share == v {
				lists = append(lists, descend(t, from, n, nil, nil))
			}
		}
		found = newestFirst(lists, n)
	case "JOB_NAME":
		name, prefix := strings.CutSuffix(f.Values[0], "*")
		var ok bool
		if found, ok = qs.nameRange(name, prefix, from, n); !ok {
			found = qs.jobs.descend(from, n, match, nil)
		}
	case "BEFORE_CREATED_AT":
		// Every job from the bound down matches: start there.
		ms, _ := parseMillis(f.Values[0])
		if ms <= 0 {
			break // nothing was created before 1970
		}
		if bound := ms*int64(time.Millisecond) - 1; ms < math.MaxInt64/int64(time.Millisecond) && (from == 0 || bound < from) {
			from = bound
		}
		found = qs.jobs.descend(from, n, match, nil)
	case "AFTER_CREATED_AT":
		// Newest first, the matches end at the first job at or before the bound.
		found = qs.jobs.descend(from, n, nil, func(j *quotashare.Job) bool { return !match(j) })
	}
	var out []quotashare.Job
	for _, j := range found[:min(limit, len(found))] {
		out = append(out, st.cloneJob(j))
	}
	if len(found) <= limit {
		return out, 0, nil
	}
	return out, found[limit].CreatedAt.UnixNano(), nil
}

func jobMatcher(f ListFilter) (func(*quotashare.Job) bool, error) {
	status := func(j *quotashare.Job) bool { return j.Status == f.Status }
	if f.Status == "" {
		status = func(j *quotashare.Job) bool { return j.Status == quotashare.Running }
	}
	if f.Filter == "" {
		return status, nil
	}
	if len(f.Values) != 1 {
		return nil, invalid("filters[0].values: give exactly one value, got %d", len(f.Values))
	}
	v := f.Values[0]
	switch f.Filter {
	case "JOB_NAME":
		prefix, isPrefix := strings.CutSuffix(strings.ToLower(v), "*")
		return func(j *quotashare.Job) bool {
			n := strings.ToLower(j.Name)
			return n == prefix || (isPrefix && strings.HasPrefix(n, prefix))
		}, nil
	case "QUOTA_SHARE_NAME":
		if f.Status == "" {
			return func(j *quotashare.Job) bool { return j.Share == v }, nil
		}
		return func(j *quotashare.Job) bool { return j.Share == v && status(j) }, nil
	case "BEFORE_CREATED_AT", "AFTER_CREATED_AT":
		ms, err := parseMillis(v)
		if err != nil {
			return nil, invalid("filters[0].values: %q must be a time in epoch milliseconds", v)
		}
		// Compared at the wire's precision, milliseconds.
		if f.Filter == "BEFORE_CREATED_AT" {
			return func(j *quotashare.Job) bool { return j.CreatedAt.UnixMilli() < ms }, nil
		}
		return func(j *quotashare.Job) bool { return j.CreatedAt.UnixMilli() > ms }, nil
	case "SHARE_IDENTIFIER":
		return nil, invalid("filters[0].name: SHARE_IDENTIFIER is for fair-share queues; use QUOTA_SHARE_NAME")
	}
	return nil, invalid("filters[0].name: %q must be JOB_NAME, QUOTA_SHARE_NAME, BEFORE_CREATED_AT or AFTER_CREATED_AT (case-sensitive)", f.Filter)
}

func parseMillis(s string) (int64, error) {
	var ms int64
	if s == "" {
		return 0, invalid("empty")
	}
	for _, c := range s {
		if c < '0' || c > '9' || ms > (1<<62)/10 {
			return 0, invalid("not a number")
		}
		ms = ms*10 + int64(c-'0')
	}
	return ms, nil
}

// Snapshot is GetJobQueueSnapshot's answer.
type Snapshot struct {
	At time.Time
	// Front is the first RUNNABLE jobs across the queue, by priority then submission time;
	// ShareFront each share's first RUNNABLE job.
	Front      []FrontJob
	ShareFront map[string]FrontJob
	// Capacity is the environment's limit and use per type; Shares each share's numbers
	// as the core counts them (limit, in use, borrowed, idle, waiting jobs).
	Capacity []sched.CapacityUsage
	Shares   []sched.ShareUsage
}

// FrontJob is a job at the front of a queue, and since when it has been waiting there.
type FrontJob struct {
	ID    string
	Since time.Time
}

// Snapshot returns the queue's front jobs and capacity use.
func (st *State) Snapshot(queue string) (Snapshot, error) {
	qs, err := st.queueNamed(queue)
	if err != nil {
		return Snapshot{}, err
	}
	snap := Snapshot{At: st.clock, ShareFront: map[string]FrontJob{}}
	var front []*quotashare.Job
	names := slices.Sorted(maps.Keys(qs.shares))
	if qs.fifo() {
		names = []string{fifoShare} // its one share in the core; no quota share to show
	}
	for _, name := range names {
		ids := qs.sched.Front(name, 100)
		for i, id := range ids {
			j := st.jobs[id]
			if i == 0 && !qs.fifo() {
				snap.ShareFront[name] = FrontJob{ID: j.ID, Since: j.RunnableSince}
			}
			front = append(front, j)
		}
	}
	slices.SortFunc(front, func(a, b *quotashare.Job) int {
		return cmp.Or(cmp.Compare(b.Priority, a.Priority), a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	for _, j := range front[:min(100, len(front))] {
		snap.Front = append(snap.Front, FrontJob{ID: j.ID, Since: j.RunnableSince})
	}
	snap.Capacity, snap.Shares = qs.sched.Capacity(), qs.sched.Usage()
	return snap, nil
}

// Usage returns a queue's per-share usage, as the core counts it.
func (st *State) Usage(queue string) ([]sched.ShareUsage, error) {
	qs, err := st.queueNamed(queue)
	if err != nil {
		return nil, err
	}
	return qs.sched.Usage(), nil
}

// ---- tags ----
