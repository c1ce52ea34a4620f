package procexec

// SageMaker's /opt/ml for a job: its input config, and its checkpoints.
//
// Checkpoints: CheckpointConfig's S3Uri put in each instance's LocalPath (under its private
// /opt/ml) before the attempt starts, and what the job writes there kept at the S3Uri
// every Config.CheckpointEvery and once more when the attempt is over, a preemption's
// SIGTERM grace included, before its end is reported: the next attempt, which cannot
// start before that report, resumes from the job's last checkpoint.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/johannesboyne/gofakes3"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/objstore"
	"github.com/quotashare/quotashare/internal/supervisor"
	"github.com/quotashare/quotashare/internal/trainingjob"
)

// Objects is the object store the executor keeps checkpoints and outputs in.
type Objects interface {
	Download(bucket, prefix, dir string, keep func(i int, key string) bool) (files int, bytes int64, stamps map[string]objstore.Stamp, err error)
	Upload(dir, bucket, prefix string, sent map[string]objstore.Stamp) (files int, bytes int64, err error)
	Put(bucket, key string, r io.Reader) error
}

// checkpoints is an attempt's CheckpointConfig and what was sent of it.
type checkpoints struct {
	uri            string
	bucket, prefix string
	rel            string // LocalPath under /opt/ml, which is the instance's folder
	stop           chan struct{}
	mu             sync.Mutex                           // one upload at a time
	sent           map[string]map[string]objstore.Stamp // by host
	// Resumed says what the attempt started from, for its log and its report; files is
	// how many files it found.
	Resumed string
	files   int
}

// checkpointRule is Check's rule for CheckpointConfig: an object store to keep them in,
// and a private /opt/ml to put LocalPath in.
func (x *Executor) checkpointRule(req *trainingjob.Request) error {
	p := trainingjob.CheckpointPath(req)
	if p == "" {
		return nil
	}
	switch {
	case x.cfg.Objects == nil:
		return errors.New("serviceRequestPayload.CheckpointConfig: this server has no object store to keep checkpoints in (serve --object-store)")
	case !x.optML:
		return fmt.Errorf("serviceRequestPayload.CheckpointConfig: this server cannot give each instance a private %s (%s), where the local executor keeps checkpoints; run it as root", supervisor.OptML, x.optMLWhy)
	case !strings.HasPrefix(p, supervisor.OptML+"/") || !filepath.IsLocal(strings.TrimPrefix(p, supervisor.OptML+"/")):
		return fmt.Errorf("serviceRequestPayload.CheckpointConfig.LocalPath: %q must be under %s, which the local executor gives each instance privately", p, supervisor.OptML)
	}
	return nil
}

// newCheckpoints reads an attempt's CheckpointConfig (nil without one).
func newCheckpoints(req *trainingjob.Request) *checkpoints {
	p := trainingjob.CheckpointPath(req)
	if p == "" {
		return nil
	}
	bucket, prefix, _ := trainingjob.ParseS3URI(req.CheckpointConfig.S3Uri) // checked at submit
	return &checkpoints{uri: req.CheckpointConfig.S3Uri, bucket: bucket, prefix: prefix, rel: strings.TrimPrefix(p, supervisor.OptML+"/"),
		stop: make(chan struct{}), sent: map[string]map[string]objstore.Stamp{}}
}

func (c *checkpoints) dir(r *run, host string) string {
	return filepath.Join(r.dir, host, filepath.FromSlash(c.rel))
}

// stage puts the checkpoint in each instance's folder before it starts. A missing bucket
// is the job's fault (SageMaker's ClientError); anything else the host's.
func (x *Executor) stage(r *run) error {
	c := r.ckpt
	var files int
	var bytes int64
	for _, is := range r.state.Instances {
		dir := c.dir(r, is.Host)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		n, b, stamps, err := x.cfg.Objects.Download(c.bucket, c.prefix, dir, nil)
		if gofakes3.HasErrorCode(err, gofakes3.ErrNoSuchBucket) {
			return &jobError{fmt.Errorf("CheckpointConfig.S3Uri %s: the bucket %s does not exist", c.uri, c.bucket), quotashare.ExitClientError}
		}
		if err != nil {
			return fmt.Errorf("staging the checkpoint %s: %w", c.uri, err)
		}
		c.sent[is.Host] = stamps
		files, bytes = n, b
		if r.uid != 0 {
			if err := chownTree(filepath.Join(r.dir, is.Host), int(r.uid)); err != nil {
				return err
			}
		}
	}
	c.files = files
	if files > 0 {
		c.Resumed = fmt.Sprintf("resumed from the checkpoint at %s: %d file(s), %d bytes", c.uri, files, bytes)
	} else {
		c.Resumed = fmt.Sprintf("no checkpoint at %s yet: started from the beginning", c.uri)
	}
	return nil
}

// chownTree gives the job's user the instance's folder and what was staged in it.
func chownTree(dir string, uid int) error {
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
}

// keep uploads what changed in each instance's checkpoint folder.
func (x *Executor) keep(r *run) error {
	c := r.ckpt
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, is := range r.state.Instances {
		if c.sent[is.Host] == nil {
			c.sent[is.Host] = map[string]objstore.Stamp{}
		}
		dir := c.dir(r, is.Host)
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if _, _, err := x.cfg.Objects.Upload(dir, c.bucket, c.prefix, c.sent[is.Host]); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", is.Host, err))
		}
	}
	return errors.Join(errs...)
}

// keepEvery uploads the checkpoints every Config.CheckpointEvery until the attempt ends.
func (x *Executor) keepEvery(r *run) {
	t := time.NewTicker(x.cfg.CheckpointEvery)
	defer t.Stop()
	for {
		select {
		case <-r.ckpt.stop:
			return
		case <-x.done:
			return
		case <-t.C:
			if err := x.keep(r); err != nil {
				x.cfg.Logf("quotashare: keeping the checkpoints of attempt %s at %s: %v (tried again in %s)", r.spec.AttemptID, r.ckpt.uri, err, x.cfg.CheckpointEvery)
			}
		}
	}
}

// writeConfig writes SageMaker's /opt/ml/input/config files in each instance's folder
// (hyperparameters.json, resourceconfig.json, inputdataconfig.json, with the members
// SageMaker writes) and links /opt/ml/input/data/<channel> to each channel on this host,
// for a request shaped for SageMaker (one with HyperParameters or InputDataConfig: the
// SageMaker SDK's driver scripts read them); a plain command pays nothing for them.
func (x *Executor) writeConfig(r *run, req *trainingjob.Request, hosts []string) error {
	if !x.optML || len(req.HyperParameters) == 0 && len(req.InputDataConfig) == 0 {
		return nil
	}
	hps := req.HyperParameters
	if hps == nil {
		hps = map[string]string{}
	}
	channels := map[string]any{}
	for _, c := range req.InputDataConfig {
		dist := "FullyReplicated"
		if c.Sharded() {
			dist = "ShardedByS3Key"
		}
		channels[c.ChannelName] = map[string]string{"TrainingInputMode": "File", "S3DistributionType": dist, "RecordWrapperType": "None"}
	}
	for _, is := range r.state.Instances {
		idir := filepath.Join(r.dir, is.Host)
		cfgDir := filepath.Join(idir, "input", "config")
		if err := os.MkdirAll(cfgDir, 0o755); err != nil {
			return err
		}
		resource := map[string]any{"current_host": is.Host, "current_instance_type": is.Type, "current_group_name": "homogeneousCluster",
			"hosts": hosts, "network_interface_name": "eth0",
			"instance_groups": []map[string]any{{"instance_group_name": "homogeneousCluster", "instance_type": is.Type, "hosts": hosts}}}
		for name, v := range map[string]any{"hyperparameters.json": hps, "resourceconfig.json": resource, "inputdataconfig.json": channels} {
			b, _ := json.Marshal(v)
			if err := os.WriteFile(filepath.Join(cfgDir, name), b, 0o644); err != nil {
				return err
			}
		}
		data := filepath.Join(idir, "input", "data")
		if err := os.MkdirAll(data, 0o755); err != nil {
			return err
		}
		for _, c := range req.InputDataConfig {
			if p := c.LocalPath(); p != "" && filepath.IsLocal(c.ChannelName) {
				if err := os.Symlink(p, filepath.Join(data, c.ChannelName)); err != nil && !errors.Is(err, os.ErrExist) {
					return err
				}
			}
		}
	}
	return nil
}
