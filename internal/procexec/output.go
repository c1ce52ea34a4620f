package procexec

// Outputs: a successful attempt's /opt/ml/model and /opt/ml/output/data kept where its
// OutputDataConfig says, as SageMaker keeps them: <S3OutputPath>/<TrainingJobName>/output/
// model.tar.gz and output.tar.gz (CompressionType NONE: the files as they are, under model/
// and data/). Every instance's files go in, algo-1's first; a name two instances wrote is
// taken from the first.

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/quotashare/quotashare/internal/objstore"
	"github.com/quotashare/quotashare/internal/trainingjob"
)

// uploadOutputs uploads the outputs of a successful attempt; note is what its reason
// gains (where they went, or why they stay on this host).
func (x *Executor) uploadOutputs(r *run) (note string, err error) {
	req := r.spec.Request
	if req == nil || req.OutputDataConfig == nil || req.OutputDataConfig.S3OutputPath == "" {
		return "", nil
	}
	o := req.OutputDataConfig
	if x.cfg.Objects == nil {
		return " (its model stays on this host: the server has no object store for OutputDataConfig)", nil
	}
	bucket, base, _ := trainingjob.OutputBase(req, r.spec.JobName, r.spec.JobID)
	// Each folder, its archive's name and, uncompressed, its folder's in the store.
	for _, out := range []struct{ dir, name, files string }{{"model", "model", "model"}, {filepath.Join("output", "data"), "output", "data"}} {
		var dirs []string
		for _, is := range r.state.Instances {
			dirs = append(dirs, filepath.Join(r.dir, is.Host, out.dir))
		}
		var uri string
		if o.CompressionType == "NONE" {
			key := path.Join(base, out.files)
			uri = "s3://" + bucket + "/" + key + "/"
			sent := map[string]objstore.Stamp{}
			for _, d := range dirs {
				if _, serr := os.Stat(d); serr != nil {
					continue
				}
				if _, _, err = x.cfg.Objects.Upload(d, bucket, key, sent); err != nil {
					break
				}
			}
		} else {
			key := path.Join(base, out.name+".tar.gz")
			uri = "s3://" + bucket + "/" + key
			pr, pw := io.Pipe()
			go func() { pw.CloseWithError(tarGz(pw, dirs)) }()
			err = x.cfg.Objects.Put(bucket, key, pr)
			pr.CloseWithError(err) // the writer stops if the store gave up
		}
		if err != nil {
			return "", fmt.Errorf("the attempt's %s could not be uploaded to %s: %w (its files stay on this host until the job's retention ends)", out.name, uri, err)
		}
	}
	return fmt.Sprintf(" (its model and output are at s3://%s/%s/)", bucket, base), nil
}

// tarGz writes the files of the folders as one gzipped tar, the first folder's first.
func tarGz(w io.Writer, dirs []string) error {
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	seen := map[string]bool{}
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					return nil
				}
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			if rel == "." || seen[rel] {
				return nil
			}
			seen[rel] = true
			fi, err := d.Info()
			if err != nil {
				return err
			}
			link := ""
			if fi.Mode()&os.ModeSymlink != 0 {
				if link, err = os.Readlink(p); err != nil {
					return err
				}
			}
			h, err := tar.FileInfoHeader(fi, link)
			if err != nil {
				return nil // a socket or a device: not a model's file
			}
			h.Name = filepath.ToSlash(rel)
			if fi.IsDir() {
				h.Name += "/"
			}
			h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			if !fi.Mode().IsRegular() {
				return nil
			}
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.CopyN(tw, f, h.Size)
			return err
		})
		if err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}
