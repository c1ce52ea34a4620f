package control

import (
	"flag"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/quotashare/quotashare"
)

var loadJobs = flag.Int("load.jobs", 100_000, "BenchmarkLoad: queued jobs, and as many finished ones")

// loadRecords makes the records of a store holding n queued jobs (over 10 shares, each
// waiting behind its share's limit) and n finished ones, as a server writes them: the
// queued ones through Submit and a pass, the finished ones as their records read.
func loadRecords(b *testing.B, n int) records {
	s := freshWith(b, Config{})
	store := records{}
	store.commit(s.Upgrade())
	s.Upgraded()
	var names []string
	for i := range 10 {
		names = append(names, fmt.Sprintf("share-%d", i))
	}
	poolOf(b, s, 10, names...)
	prio := 1
	// One checked request serves every job: the payload is the same.
	in := JobInput{Name: "train", Share: "share-0", Queue: "q", Type: "SAGEMAKER_TRAINING", Payload: payloadFor(1), Priority: &prio}
	c, err := CheckJob(in)
	check(b, err)
	for i := range 2 * n {
		in.Name, in.Share = fmt.Sprintf("train-%d", i), fmt.Sprintf("share-%d", i%10)
		if _, err := s.Submit(in, c); err != nil {
			b.Fatal(err)
		}
		if i%10_000 == 0 {
			step(s, time.Second)
			store.commit(s.flush())
		}
	}
	step(s, time.Second)
	store.commit(s.flush())
	// Half of them finished: the records a server writes when their attempts end.
	i := 0
	for _, j := range s.jobs {
		if i++; i > n {
			break
		}
		code := 0
		j.Seq = 1
		j.Attempts = []quotashare.Attempt{{ID: j.ID + "-1", ScheduledAt: j.CreatedAt, StartedAt: j.CreatedAt, StoppedAt: j.CreatedAt.Add(time.Hour),
			ExitCode: &code, StatusReason: "Completed: all 1 instance(s) exited 0"}}
		j.Status, j.StoppedAt = quotashare.Succeeded, j.CreatedAt.Add(time.Hour)
		s.setReason(j, quotashare.ReasonCompleted, "Completed: all 1 instance(s) exited 0", "Completed: all 1 instance(s) exited 0")
		s.touchJob(j)
	}
	store.commit(s.flush())
	return store
}

// BenchmarkLoad: a restart's load of a store of -load.jobs queued and as many finished
// jobs, rebuilding every index and scheduler, and the memory the state then holds per
// job. Run with -benchtime=1x.
func BenchmarkLoad(b *testing.B) {
	store := loadRecords(b, *loadJobs)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	var s *State
	for range b.N {
		s = nil
		runtime.GC()
		var err error
		if s, err = Load(Config{}, store.load); err != nil {
			b.Fatal(err)
		}
		s.SetTime(time.Now())
		s.step(nil, true)
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	jobs := 2 * *loadJobs
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(jobs), "heap-B/job")
	b.ReportMetric(float64(b.Elapsed().Seconds())/float64(b.N), "s/load")
	runtime.KeepAlive(s)
}
