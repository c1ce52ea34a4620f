package dispatch

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"
	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/control"
	"github.com/quotashare/quotashare/internal/storetest"
)

// fixtureState builds, on a fresh engine, a state that uses every stored field worth
// pinning: tags, time-limit actions, both share strategies, a borrow limit, a minimum run
// time (an optional member added in format 1: records without it read as none), a job that
// ran and succeeded, one running, one waiting, one terminated, retry strategies, client
// tokens and timeouts. Run it in a synctest bubble: its clock and ids are then the same
// on every run.
func fixtureState(t *testing.T, m *storetest.Memory) *Engine {
	t.Helper()
	n := 0
	e, err := Open(Config{Store: m.Open(), Control: control.Config{Logf: t.Logf, NewID: func() string {
		n++
		return fmt.Sprintf("00000000-0000-4000-8000-%012d", n)
	}}})
	if err != nil {
		t.Fatal(err)
	}
	x := &recorder{}
	if err := e.Run(x); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	synctest.Wait() // Run's first cycle
	p := mustOK[quotashare.SchedulingPolicy](t)(control.Do(e, func(st *control.State) (quotashare.SchedulingPolicy, error) {
		return st.CreatePolicy(control.PolicyInput{Name: "p", QuotaShare: true, IdleStrategy: "FIFO", Tags: map[string]string{"team": "ml"}})
	}))
	synctest.Wait() // each command's cycles end before the next: the clock's ticks are then the same on every run
	mustOK[quotashare.Environment](t)(control.Do(e, func(st *control.State) (quotashare.Environment, error) {
		return st.CreateEnvironment(control.EnvironmentInput{Name: "e", Type: "SAGEMAKER_TRAINING",
			Limits: []quotashare.Demand{{InstanceType: "ml.g5.xlarge", Count: 2}}})
	}))
	synctest.Wait() // each command's cycles end before the next: the clock's ticks are then the same on every run
	prio := 7
	mustOK[quotashare.Queue](t)(control.Do(e, func(st *control.State) (quotashare.Queue, error) {
		return st.CreateQueue(control.QueueInput{Name: "q", Type: "SAGEMAKER_TRAINING", Priority: &prio, Policy: p.Name,
			EnvOrder: []control.EnvOrder{{Order: 1, Environment: "e"}}, TimeLimitActions: []quotashare.TimeLimitAction{{Reason: "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE", MaxTimeSeconds: 600}}, Tags: map[string]string{"q": "1"}})
	}))
	synctest.Wait() // each command's cycles end before the next: the clock's ticks are then the same on every run
	mustOK[quotashare.QuotaShare](t)(control.Do(e, func(st *control.State) (quotashare.QuotaShare, error) {
		return st.CreateShare(control.ShareInput{Name: "a", Queue: "q", Strategy: quotashare.Lend, InSharePreemption: new(false),
			Limits: []quotashare.Demand{{InstanceType: "ml.g5.xlarge", Count: 1}}})
	}))
	synctest.Wait() // each command's cycles end before the next: the clock's ticks are then the same on every run
	one := 1
	mustOK[quotashare.QuotaShare](t)(control.Do(e, func(st *control.State) (quotashare.QuotaShare, error) {
		return st.CreateShare(control.ShareInput{Name: "b", Queue: "q", Strategy: quotashare.LendAndBorrow, BorrowLimit: &one,
			InSharePreemption: new(true), Limits: []quotashare.Demand{{InstanceType: "ml.g5.xlarge", Count: 1}}, Tags: map[string]string{"s": "b"},
			MinRunTime: &control.MinRunTime{Seconds: 90, AgainstReclaim: true}})
	}))
	synctest.Wait() // each command's cycles end before the next: the clock's ticks are then the same on every run
	five, hour := 5, 3600
	j1 := mustOK[quotashare.Job](t)(e.Submit(control.JobInput{Name: "j1", Queue: "q", Type: "SAGEMAKER_TRAINING", Share: "a", Payload: payload, Priority: &five}))
	synctest.Wait() // each command's cycles end before the next: the clock's ticks are then the same on every run
	mustOK[quotashare.Job](t)(e.Submit(control.JobInput{Name: "j2", Queue: "q", Type: "SAGEMAKER_TRAINING", Share: "b", Payload: payload, Priority: &five,
		Retry:             &quotashare.RetryStrategy{Attempts: 3, Rules: []quotashare.RetryRule{{Action: "RETRY", OnExitCode: "1*"}}},
		PreemptionRetries: &one, TimeoutSeconds: &hour, Tags: map[string]string{"k": "v"}, ClientToken: "token-2"}))
	synctest.Wait() // each command's cycles end before the next: the clock's ticks are then the same on every run
	mustOK[quotashare.Job](t)(e.Submit(control.JobInput{Name: "j3", Queue: "q", Type: "SAGEMAKER_TRAINING", Share: "a", Payload: payload}))
	synctest.Wait() // each command's cycles end before the next: the clock's ticks are then the same on every run
	j4 := mustOK[quotashare.Job](t)(e.Submit(control.JobInput{Name: "j4", Queue: "q", Type: "SAGEMAKER_TRAINING", Share: "a", Payload: payload}))
	synctest.Wait() // each command's cycles end before the next: the clock's ticks are then the same on every run
	if err := e.Update(func(st *control.State) error { return st.Terminate(j4.ID, "not needed") }); err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	starts, _ := x.calls()
	for _, s := range starts {
		e.Report(quotashare.Report{JobID: s.JobID, AttemptID: s.AttemptID, State: quotashare.AttemptRunning})
		synctest.Wait() // one report, one cycle: together they could share one, or not
	}
	synctest.Wait()
	code := 0
	e.Report(quotashare.Report{JobID: j1.ID, AttemptID: quotashare.AttemptID(j1.ID, 1), State: quotashare.AttemptExited, Success: true, ExitCode: &code, Detail: "Essential container exited"})
	synctest.Wait()
	mustOK[quotashare.Job](t)(e.Submit(control.JobInput{Name: "j5", Queue: "q", Type: "SAGEMAKER_TRAINING", Share: "a", Payload: payload}))
	synctest.Wait() // each command's cycles end before the next: the clock's ticks are then the same on every run
	synctest.Wait()
	return e
}

// dumpRecords reads every record of the storage.
func dumpRecords(t *testing.T, m *storetest.Memory) []storedRecord {
	t.Helper()
	var out []storedRecord
	if err := m.Open().Load(t.Context(), func(r quotashare.Record) error {
		out = append(out, storedRecord{Kind: r.Kind, Key: r.Key, Body: json.RawMessage(r.Body)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// storedRecord is a record as the golden fixtures hold it.
type storedRecord struct {
	Kind string          `json:"kind"`
	Key  string          `json:"key"`
	Body json.RawMessage `json:"body"`
}

var update = flag.Bool("update", false, "rewrite the golden stored-format fixtures in testdata")

func readFixture(t *testing.T, name string) []storedRecord {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var rs []storedRecord
	if err := json.Unmarshal(b, &rs); err != nil {
		t.Fatal(err)
	}
	return rs
}

// loadFixture makes a storage holding the fixture's records.
func loadFixture(t *testing.T, name string) *storetest.Memory {
	t.Helper()
	m := storetest.NewMemory()
	st := m.Open()
	lease, err := st.Acquire(t.Context(), quotashare.LeaseHolder{ID: "fixture"})
	if err != nil {
		t.Fatal(err)
	}
	var batch []quotashare.Record
	for _, r := range readFixture(t, name) {
		batch = append(batch, quotashare.Record{Kind: r.Kind, Key: r.Key, Body: r.Body})
	}
	if err := st.Commit(t.Context(), lease, batch); err != nil {
		t.Fatal(err)
	}
	if err := st.Release(t.Context(), lease); err != nil {
		t.Fatal(err)
	}
	return m
}

// compact re-renders each body without spaces, so that fixtures compare by content.
func compact(t *testing.T, rs []storedRecord) []storedRecord {
	t.Helper()
	out := make([]storedRecord, len(rs))
	for i, r := range rs {
		var b bytes.Buffer
		if err := json.Compact(&b, r.Body); err != nil {
			t.Fatal(err)
		}
		out[i] = storedRecord{r.Kind, r.Key, b.Bytes()}
	}
	return out
}

func diffRecords(t *testing.T, got, want []storedRecord) {
	t.Helper()
	got, want = compact(t, got), compact(t, want)
	if len(got) != len(want) {
		t.Errorf("%d records, want %d", len(got), len(want))
	}
	for i := range min(len(got), len(want)) {
		g, w := got[i], want[i]
		if g.Kind != w.Kind || g.Key != w.Key || !bytes.Equal(g.Body, w.Body) {
			t.Errorf("record %d:\n got %s %s %s\nwant %s %s %s", i, g.Kind, g.Key, g.Body, w.Kind, w.Key, w.Body)
		}
	}
}

// TestStoredFormat pins the stored format: the records this release writes for the
// fixture state are, byte for byte, the golden ones in testdata/stored-v2.json. A change
// to the stored types fails here; a deliberate one raises formatVersion, teaches decode
// the old version, and rewrites the fixture with -update.
func TestStoredFormat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := storetest.NewMemory()
		fixtureState(t, m).Close()
		got := dumpRecords(t, m)
		if *update {
			b, _ := json.MarshalIndent(got, "", "  ")
			if err := os.WriteFile(filepath.Join("testdata", "stored-v2.json"), append(b, '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		diffRecords(t, got, readFixture(t, "stored-v2.json"))
	})
}

var subSecond = regexp.MustCompile(`(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.\d+Z`)

// describeAll renders what a client sees of the engine's state by name.
func describeAll(t *testing.T, e *Engine) string {
	t.Helper()
	var b strings.Builder
	qs, err := control.Get(e, func(st *control.State) ([]quotashare.Queue, error) { return st.DescribeQueues([]string{"q"}), nil })
	if err != nil || len(qs) != 1 {
		t.Fatalf("queue q by name: %v %v", qs, err)
	}
	envs, err := control.Get(e, func(st *control.State) ([]quotashare.Environment, error) {
		return st.DescribeEnvironments([]string{"e"}), nil
	})
	if err != nil || len(envs) != 1 {
		t.Fatalf("environment e by name: %v %v", envs, err)
	}
	shares, err := control.Get(e, func(st *control.State) ([]quotashare.QuotaShare, error) { return st.ListShares("q") })
	if err != nil || len(shares) != 2 {
		t.Fatalf("shares of q: %v %v", shares, err)
	}
	render := func(v any) {
		out, err := json.Marshal(v) // deep: pointers as what they point to
		if err != nil {
			t.Fatal(err)
		}
		// Times to the second: the fixtures of older versions were written by older code,
		// whose loop took its nanosecond steps in other places (TestStoredFormat pins
		// this version's times exactly).
		b.Write(subSecond.ReplaceAll(out, []byte("${1}Z")))
		b.WriteByte('\n')
	}
	e.View(func(st *control.State) error { render(st.DescribePolicies(st.PolicyNames())); return nil })
	render(envs)
	render(qs)
	render(shares)
	jobs := listJobs(t, e, control.ListFilter{Queue: "q", Filter: "JOB_NAME", Values: []string{"*"}})
	if len(jobs) != 5 {
		t.Fatalf("jobs of q: %d, want 5", len(jobs))
	}
	for _, j := range jobs {
		// A waiting job's reason is said again by the first pass, and version 0 kept no
		// detail apart from the statusReason: the codes are compared, not the sentences.
		j.StatusReason, j.ReasonDetail, j.RequestDigest = "", "", "" // nor a request digest
		render(j)
	}
	return b.String()
}

// TestLoadFormats: the golden records of every format version load into the same state
// as the engine that wrote them had, and a version-0 store is rewritten in the current
// format in Open's one commit.
func TestLoadFormats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		want := describeAll(t, fixtureState(t, storetest.NewMemory()))
		for _, name := range []string{"stored-v0.json", "stored-v1.json", "stored-v2.json"} {
			m := loadFixture(t, name)
			e := openMemory(t, m, &recorder{})
			want := want
			if name == "stored-v0.json" {
				// Format 0 predates the minimum run time: share b has none.
				want = strings.Replace(want, `"MinRunTime":90000000000,"MinRunTimeAgainstReclaim":true`, `"MinRunTime":0,"MinRunTimeAgainstReclaim":false`, 1)
			}
			if got := describeAll(t, e); got != want {
				t.Errorf("%s loads as\n%s\nwant\n%s", name, got, want)
			}
			e.Close()
			if name == "stored-v0.json" {
				// Keys by name, the format record, no ARN left as a key.
				got := dumpRecords(t, m)
				if got[0].Kind != "_format" || !strings.HasPrefix(string(got[0].Body), `{"version":2,"jobKeysByTimeSince":`) {
					t.Errorf("first record after the upgrade: %s %s %s", got[0].Kind, got[0].Key, got[0].Body)
				}
				for _, r := range got {
					if strings.HasPrefix(r.Key, "arn:") || bytes.Contains(r.Body, []byte("arn:")) {
						t.Errorf("record %s %s still holds an ARN: %s", r.Kind, r.Key, r.Body)
					}
				}
			}
		}
	})
}

// TestNewerFormatRefused: a store written by a newer release is refused, not misread.
func TestNewerFormatRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := loadFixture(t, "stored-v1.json")
		st := m.Open()
		lease, _ := st.Acquire(t.Context(), quotashare.LeaseHolder{ID: "newer"})
		if err := st.Commit(t.Context(), lease, []quotashare.Record{{Kind: "_format", Key: "version", Body: []byte(`{"version":99}`)}}); err != nil {
			t.Fatal(err)
		}
		st.Release(t.Context(), lease)
		_, err := Open(Config{Store: m.Open()})
		if err == nil || !strings.Contains(err.Error(), "format version 99, newer than this quotashare knows") {
			t.Fatalf("opening a newer store: %v", err)
		}
	})
}

// TestRegionChange: the state holds no ARN, so nothing in it depends on the region and
// account the server runs as (batchapi makes ARNs; server TestRegionChange restarts a
// data folder under another --region through the SDK). Stores of every format load with
// every link by name, and take new work.
func TestRegionChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, name := range []string{"stored-v0.json", "stored-v1.json", "stored-v2.json"} {
			m := loadFixture(t, name)
			e, err := Open(Config{Store: m.Open(), Control: control.Config{Logf: t.Logf}})
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Run(&recorder{}); err != nil {
				t.Fatal(err)
			}
			got := describeAll(t, e)
			if strings.Contains(got, "arn:") || !strings.Contains(got, `"Name":"a","Queue":"q"`) {
				t.Errorf("%s: the state by name:\n%s", name, got)
			}
			if j, err := submit(e, "after"); err != nil || j.Queue != "q" {
				t.Errorf("%s: submit: %+v %v", name, j, err)
			}
			if _, err := control.Get(e, func(st *control.State) (quotashare.QuotaShare, error) {
				return st.DescribeShare(control.ShareRef{Queue: "q", Name: "b"})
			}); err != nil {
				t.Errorf("%s: share b of q: %v", name, err)
			}
			e.Close()
		}
	})
}

// TestJobKeys: a store that began in format 2 keys each job by its creation time, then
// its id, so that keys sort as the jobs arrived. A store of format 1 upgraded to 2 keeps
// its jobs under their ids (no job is rewritten by the upgrade), records in its format
// record from when jobs are keyed by time, and keys the jobs created after by time; a
// job of either kind is written again under its own key, never under a second one.
func TestJobKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Job records by id, from their keys.
		jobKeys := func(m *storetest.Memory) map[string]string {
			out := map[string]string{}
			for _, r := range dumpRecords(t, m) {
				if r.Kind != "job" {
					continue
				}
				var b struct{ ID string }
				if err := json.Unmarshal(r.Body, &b); err != nil {
					t.Fatal(err)
				}
				if k, ok := out[b.ID]; ok {
					t.Errorf("job %s is stored twice: under %s and %s", b.ID, k, r.Key)
				}
				out[b.ID] = r.Key
			}
			return out
		}
		timeKeyed := func(id, key string) bool { return len(key) == 17+len(id) && key[16] == '-' && key[17:] == id }

		// Begun in format 2: every job by time, in the order of submission.
		m := storetest.NewMemory()
		e := openMemory(t, m, &recorder{})
		setupQueue(t, e, 1)
		var keys []string
		for _, name := range []string{"a", "b", "c"} {
			j := mustOK[quotashare.Job](t)(submit(e, name))
			keys = append(keys, jobKeys(m)[j.ID])
			if !timeKeyed(j.ID, keys[len(keys)-1]) {
				t.Fatalf("job %s keyed %s", j.ID, keys[len(keys)-1])
			}
		}
		if !slices.IsSorted(keys) {
			t.Errorf("keys not in the order of submission: %v", keys)
		}
		e.Close()

		// Format 1, upgraded.
		m = loadFixture(t, "stored-v1.json")
		old := jobKeys(m)
		e = openMemory(t, m, &recorder{})
		if got := dumpRecords(t, m)[0]; !strings.HasPrefix(string(got.Body), `{"version":2,"jobKeysByTimeSince":"`) {
			t.Fatalf("the format record after the upgrade: %s", got.Body)
		}
		if diff := cmp.Diff(old, jobKeys(m)); diff != "" {
			t.Fatalf("the upgrade moved jobs (-before +after):\n%s", diff)
		}
		// An old job written again, and a new one.
		var waiting string
		for id := range old {
			if j, _ := control.Get(e, func(st *control.State) (quotashare.Job, error) { return st.Job(id) }); j.Status == quotashare.Runnable {
				waiting = id
			}
		}
		if waiting == "" {
			t.Fatal("the fixture has no waiting job")
		}
		mustOK[quotashare.Job](t)(control.Do(e, func(st *control.State) (quotashare.Job, error) { return st.SetPriority(waiting, 9) }))
		added := mustOK[quotashare.Job](t)(submit(e, "after"))
		e.Close()
		e = openMemory(t, m, &recorder{})
		now := jobKeys(m)
		if now[waiting] != waiting || !timeKeyed(added.ID, now[added.ID]) || len(now) != len(old)+1 {
			t.Errorf("keys after an update and a submit: %v (the old job %s, the new one %s)", now, waiting, added.ID)
		}
		if j, err := control.Get(e, func(st *control.State) (quotashare.Job, error) { return st.Job(waiting) }); err != nil || j.Priority != 9 {
			t.Errorf("the old job after a restart: %+v %v", j, err)
		}
		e.Close()
	})
}
