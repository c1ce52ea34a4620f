package objstore

// Copies between the store and a host folder, for the executor: a checkpoint staged before
// an attempt and kept while it runs. They go to the store's files directly, not through
// HTTP: the executor runs in the server that holds the store.

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/johannesboyne/gofakes3"
)

// Stamp is what a copy knows of a file it sent, to send it again only once it changed.
type Stamp struct {
	Size    int64
	ModTime time.Time
}

// Download copies every object under prefix in bucket into dir, by the rest of its key
// (keys that would leave dir, or that end in '/', are skipped), and returns how many
// files and bytes it wrote and the stamps of the files it wrote. A missing bucket is an
// error; an empty prefix in it is none. keep, if set, chooses the objects: it is given
// each object's index in key order (among those under prefix) and its key.
func (s *Store) Download(bucket, prefix, dir string, keep func(i int, key string) bool) (files int, bytes int64, stamps map[string]Stamp, err error) {
	return downloadDir(s, bucket, prefix, dir, keep)
}

// copier is what Download and Upload need of a store: the embedded one's files, or an
// external store's API (Remote). A missing bucket is gofakes3.BucketNotFound from each.
type copier interface {
	BucketExists(bucket string) (bool, error)
	keys(bucket, prefix string) ([]string, error) // in key order
	getFile(bucket, key, path string) (int64, error)
	putFile(bucket, key, path string) error
}

func (s *Store) keys(bucket, prefix string) ([]string, error) {
	l, err := s.ListBucket(bucket, &gofakes3.Prefix{HasPrefix: prefix != "", Prefix: prefix}, gofakes3.ListBucketPage{MaxKeys: 1 << 30})
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(l.Contents))
	for i, c := range l.Contents {
		keys[i] = c.Key
	}
	return keys, nil
}

func downloadDir(s copier, bucket, prefix, dir string, keep func(i int, key string) bool) (files int, bytes int64, stamps map[string]Stamp, err error) {
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/" // s3://b/ckpt is the folder ckpt, not every key that starts so
	}
	keys, err := s.keys(bucket, prefix)
	if err != nil {
		return 0, 0, nil, err
	}
	stamps = map[string]Stamp{}
	i := -1
	for _, key := range keys {
		rel := strings.TrimPrefix(key, prefix)
		if rel == "" || strings.HasSuffix(rel, "/") || !filepath.IsLocal(rel) {
			continue
		}
		if i++; keep != nil && !keep(i, key) {
			continue
		}
		path := filepath.Join(dir, filepath.FromSlash(rel))
		n, err := s.getFile(bucket, key, path)
		if errors.Is(err, os.ErrNotExist) || gofakes3.HasErrorCode(err, gofakes3.ErrNoSuchKey) {
			continue // deleted since the listing
		}
		if err != nil {
			return files, bytes, stamps, fmt.Errorf("s3://%s/%s: %w", bucket, key, err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			return files, bytes, stamps, err
		}
		stamps[rel] = Stamp{fi.Size(), fi.ModTime()}
		files++
		bytes += n
	}
	return files, bytes, stamps, nil
}

func (s *Store) getFile(bucket, key, path string) (int64, error) {
	obj, err := s.GetObject(bucket, key, nil)
	if err != nil {
		return 0, err
	}
	defer obj.Contents.Close()
	return writeTo(path, obj.Contents)
}

// writeTo writes a file, and the folders it is in, from r.
func writeTo(path string, r io.Reader) (int64, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return 0, err
	}
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// Upload copies the regular files under dir to bucket, each under prefix + its path in
// dir, but those whose stamp is the one in sent (a file unchanged since the last Upload
// or Download); it records what it sent in sent, and returns how many files and bytes.
// Objects of files since removed are kept, as SageMaker keeps them. A file that changes
// while it is read is sent as read, and again at the next Upload.
func (s *Store) Upload(dir, bucket, prefix string, sent map[string]Stamp) (files int, bytes int64, err error) {
	return uploadDir(s, dir, bucket, prefix, sent)
}

func uploadDir(s copier, dir, bucket, prefix string, sent map[string]Stamp) (files int, bytes int64, err error) {
	if ok, err := s.BucketExists(bucket); err != nil {
		return 0, 0, err
	} else if !ok {
		return 0, 0, gofakes3.BucketNotFound(bucket)
	}
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	type file struct {
		path, rel string
		st        Stamp
	}
	var todo []file
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil // removed while walking
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(dir, path)
		rel = filepath.ToSlash(rel)
		if st := (Stamp{fi.Size(), fi.ModTime()}); sent[rel] != st {
			todo = append(todo, file{path, rel, st})
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	// A few at a time: one file's hash and write while another's sync waits on the disk.
	var mu sync.Mutex
	var errs []error
	work := make(chan file)
	var wg sync.WaitGroup
	for range min(uploaders, len(todo)) {
		wg.Go(func() {
			for f := range work {
				err := s.putFile(bucket, prefix+f.rel, f.path)
				mu.Lock()
				switch {
				case errors.Is(err, os.ErrNotExist): // removed since the walk
				case err != nil:
					errs = append(errs, fmt.Errorf("s3://%s/%s%s: %w", bucket, prefix, f.rel, err))
				default:
					sent[f.rel] = f.st
					files++
					bytes += f.st.Size
				}
				mu.Unlock()
			}
		})
	}
	for _, f := range todo {
		work <- f
	}
	close(work)
	wg.Wait()
	return files, bytes, errors.Join(errs...)
}

// Put writes one object from r, whose size it need not know.
func (s *Store) Put(bucket, key string, r io.Reader) error {
	_, err := s.PutObject(bucket, key, nil, r, -1, nil)
	return err
}

// uploaders is how many files Upload sends at once.
const uploaders = 4

func (s *Store) putFile(bucket, key, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = s.PutObject(bucket, key, nil, f, -1, nil)
	return err
}
