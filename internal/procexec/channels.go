package procexec

// S3 channels: each InputDataConfig channel whose S3Uri names a bucket of the object
// store is copied into every instance's /opt/ml/input/data/<channel> before the attempt
// starts: all of its objects (FullyReplicated), or instance i of n the objects whose
// index in key order is i modulo n (ShardedByS3Key), as SageMaker's File mode does.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/johannesboyne/gofakes3"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/trainingjob"
)

// channelRule is Check's rule for channels: each must be data this executor can put in
// front of the job (a folder on this host, or objects of its object store), unless the
// server was told that jobs fetch their own.
func (x *Executor) channelRule(req *trainingjob.Request) error {
	if x.cfg.UnstagedChannels {
		return nil
	}
	var remote []string
	for _, c := range req.InputDataConfig {
		if c.LocalPath() == "" && (c.S3() == "" || x.cfg.Objects == nil) {
			remote = append(remote, c.ChannelName)
		}
	}
	if len(remote) == 0 {
		return nil
	}
	store := "its object store's s3:// URIs"
	if x.cfg.Objects == nil {
		store = "s3:// URIs only with an object store (serve --object-store embedded)"
	}
	return fmt.Errorf("serviceRequestPayload.InputDataConfig: channel(s) %s name data the local executor does not stage (it stages FileSystemDataSource directories and file:// or /path S3Uris on this host, and %s); point them at those, or run the server with --unstaged-channels allow if the job fetches its own data",
		strings.Join(remote, ", "), store)
}

// stageChannels copies the request's S3 channels into each instance's folder, and
// records which it staged (r.channels). A bucket the store does not have, or a prefix
// with no objects, is the job's fault (SageMaker's ClientError), unless the server lets
// jobs fetch their own data; anything else (a full disk) is the host's.
func (x *Executor) stageChannels(r *run, req *trainingjob.Request) error {
	if x.cfg.Objects == nil {
		return nil
	}
	for _, c := range req.InputDataConfig {
		uri := c.S3()
		if uri == "" {
			continue
		}
		bucket, prefix, _ := trainingjob.ParseS3URI(uri) // checked at submit
		n, files, missing := len(r.state.Instances), 0, false
		var bytes int64
		for i, is := range r.state.Instances {
			dir := filepath.Join(r.dir, is.Host, "input", "data", c.ChannelName)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			var keep func(int, string) bool
			if c.Sharded() {
				keep = func(k int, _ string) bool { return k%n == i }
			}
			f, b, _, err := x.cfg.Objects.Download(bucket, prefix, dir, keep)
			if gofakes3.HasErrorCode(err, gofakes3.ErrNoSuchBucket) {
				if x.cfg.UnstagedChannels {
					missing = true // not this store's: the job fetches it
					break
				}
				return &jobError{fmt.Errorf("InputDataConfig channel %s: S3Uri %s: the bucket %s does not exist", c.ChannelName, uri, bucket), quotashare.ExitClientError}
			}
			if err != nil {
				return fmt.Errorf("staging channel %s from %s: %w", c.ChannelName, uri, err)
			}
			files, bytes = files+f, bytes+b
		}
		if missing || files == 0 && x.cfg.UnstagedChannels {
			continue
		}
		if files == 0 {
			return &jobError{fmt.Errorf("InputDataConfig channel %s: no objects under S3Uri %s", c.ChannelName, uri), quotashare.ExitClientError}
		}
		if r.channels == nil {
			r.channels = map[string]string{}
		}
		r.channels[c.ChannelName] = fmt.Sprintf("%d file(s), %d bytes", files, bytes)
	}
	if r.uid != 0 && len(r.channels) > 0 {
		for _, is := range r.state.Instances {
			if err := chownTree(filepath.Join(r.dir, is.Host, "input"), int(r.uid)); err != nil {
				return err
			}
		}
	}
	return nil
}
