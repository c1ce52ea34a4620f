package procexec

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/objstore"
)

// slowObjects is an object store whose downloads wait for the test to let them finish:
// staging that takes as long as the test likes. (The real store is fast on a small
// object; TestChannels in internal/server stages from it.)
type slowObjects struct {
	entered chan string
	release chan struct{}
}

func (o *slowObjects) Download(bucket, prefix, dir string, keep func(int, string) bool) (int, int64, map[string]objstore.Stamp, error) {
	o.entered <- bucket + "/" + prefix
	<-o.release
	return 1, 3, nil, os.WriteFile(filepath.Join(dir, "a.csv"), []byte("a,1"), 0o644)
}
func (o *slowObjects) Upload(string, string, string, map[string]objstore.Stamp) (int, int64, error) {
	return 0, 0, nil
}
func (o *slowObjects) Put(string, string, io.Reader) error { return nil }

// TestStagingOffTheLock: an attempt whose channel is being staged holds neither Start nor
// the executor's lock: Start returns at once, another attempt starts and ends meanwhile,
// and a Stop meanwhile ends the staged attempt before any of its processes starts. An
// attempt whose staging finishes runs with its data, and its RUNNING reason says so.
func TestStagingOffTheLock(t *testing.T) {
	dir := t.TempDir()
	objs := &slowObjects{entered: make(chan string, 4), release: make(chan struct{})}
	x, ch := newExecWith(t, Config{Dir: dir, Grace: time.Second, Objects: objs})
	staged := func(id string) quotashare.AttemptSpec {
		marker := filepath.Join(dir, id+".ran")
		return spec(id, payload(t, `cat "$SM_CHANNEL_TRAIN/a.csv" > `+marker, map[string]any{
			"InputDataConfig": []map[string]any{{"ChannelName": "train", "DataSource": map[string]any{"S3DataSource": map[string]any{"S3Uri": "s3://data/train"}}}}}))
	}

	returned := make(chan error, 1)
	go func() { returned <- x.Start(staged("a1")) }()
	if got := <-objs.entered; got != "data/train" {
		t.Fatalf("staged %q", got)
	}
	if err := <-returned; err != nil { // while the download still waits
		t.Fatal(err)
	}
	// The lock is free: another attempt starts and ends meanwhile.
	if err := x.Start(spec("b1", payload(t, "true", nil))); err != nil {
		t.Fatal(err)
	}
	if rep := ch.next(t, quotashare.AttemptRunning); rep.AttemptID != "b1" {
		t.Fatalf("first report %+v, want b1 running", rep)
	}
	if rep := ch.next(t, quotashare.AttemptExited); rep.AttemptID != "b1" || !rep.Success {
		t.Fatalf("b1 ended %+v", rep)
	}
	if err := x.Stop("a1"); err != nil {
		t.Fatal(err)
	}
	objs.release <- struct{}{}
	rep := ch.next(t, quotashare.AttemptExited)
	if rep.AttemptID != "a1" || rep.Kind != quotashare.ExitStopped || rep.Reason() != "Stopped: before it started (while its data was staged)" {
		t.Fatalf("a1 stopped while staging: %+v (%s)", rep, rep.Reason())
	}
	if _, err := os.Stat(filepath.Join(dir, "a1.ran")); !os.IsNotExist(err) {
		t.Errorf("a1's program ran after a Stop while its data was staged: %v", err)
	}

	go func() { returned <- x.Start(staged("a2")) }()
	<-objs.entered
	if err := <-returned; err != nil {
		t.Fatal(err)
	}
	objs.release <- struct{}{}
	if rep := ch.next(t, quotashare.AttemptRunning); rep.AttemptID != "a2" || !strings.Contains(rep.Detail, "channel train: 1 file(s), 3 bytes") {
		t.Fatalf("a2 running: %+v", rep)
	}
	if rep := ch.next(t, quotashare.AttemptExited); rep.AttemptID != "a2" || !rep.Success {
		t.Fatalf("a2 ended: %+v (%s)", rep, rep.Reason())
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a2.ran")); err != nil || string(b) != "a,1" {
		t.Errorf("a2 read %q from its channel (%v)", b, err)
	}
}
