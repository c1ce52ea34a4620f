// Package objstore is quotashare's embedded S3-compatible object store: the objects a
// training job reads (its channels), writes (its model and output) and keeps across
// attempts (its checkpoints), in the server's data folder.
//
// The S3 protocol (routing, XML, errors, multipart bookkeeping, ranges, listing pages)
// is github.com/johannesboyne/gofakes3's; this package gives it a backend of its own
// (Store: one file per object, written whole and renamed into place after an fsync, so a
// crash leaves the old object or the new one, never half of one; multipart parts
// streamed to files rather than held in memory) and puts quotashare's SigV4 verifier,
// streaming-payload decoding and authorization in front of it (Handler).
package objstore

import (
	"bytes"
	"cmp"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/quotashare/quotashare/internal/syncfile"
)

// Store keeps buckets in a folder: <dir>/<bucket>/bucket.json, its objects in
// <dir>/<bucket>/o/<sha256 of the key>, and multipart uploads in progress in
// <dir>/<bucket>/u/<upload id>/. An object's file is its bytes followed by a trailer (the
// key, its metadata, its MD5 and its time, as JSON) and the trailer's length in 8 bytes,
// so that one rename puts the whole object in place. An index of every bucket's keys is
// kept in memory for listing; it is read from the files at Open.
type Store struct {
	dir string
	now func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
	uploads map[gofakes3.UploadID]*upload
}

type bucket struct {
	Created time.Time `json:"created"`
	objects map[string]*entry
	sorted  []string // the keys in order; nil when it must be made again
}

// entry is what the index keeps of an object, and its file's trailer.
type entry struct {
	Key      string            `json:"key"`
	Size     int64             `json:"size"`
	MD5      []byte            `json:"md5"`
	Parts    int               `json:"parts,omitempty"` // of a multipart upload: the ETag is the MD5 of the parts' MD5s, -N
	Meta     map[string]string `json:"meta,omitempty"`
	Modified time.Time         `json:"modified"`
}

func (e *entry) etag() string {
	if e.Parts > 0 {
		return fmt.Sprintf(`"%s-%d"`, hex.EncodeToString(e.MD5), e.Parts)
	}
	return `"` + hex.EncodeToString(e.MD5) + `"`
}

type upload struct {
	Bucket    string            `json:"bucket"`
	Key       string            `json:"key"`
	Meta      map[string]string `json:"meta,omitempty"`
	Initiated time.Time         `json:"initiated"`
	id        gofakes3.UploadID
	parts     map[int]*entry // by part number: size and MD5
}

var (
	_ gofakes3.Backend          = (*Store)(nil)
	_ gofakes3.MultipartBackend = (*Store)(nil)
)

// Open opens (creating it if need be) the store in dir and reads its index.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	s := &Store{dir: dir, now: time.Now, buckets: map[string]*bucket{}, uploads: map[gofakes3.UploadID]*upload{}}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, d := range ents {
		if !d.IsDir() {
			continue
		}
		name := d.Name()
		data, err := os.ReadFile(filepath.Join(dir, name, "bucket.json"))
		if errors.Is(err, os.ErrNotExist) {
			continue // a bucket whose creation did not finish
		} else if err != nil {
			return nil, err
		}
		b := &bucket{objects: map[string]*entry{}}
		if err := json.Unmarshal(data, b); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, name, "bucket.json"), err)
		}
		if err := s.loadObjects(name, b); err != nil {
			return nil, err
		}
		if err := s.loadUploads(name); err != nil {
			return nil, err
		}
		s.buckets[name] = b
	}
	return s, nil
}

func (s *Store) loadObjects(name string, b *bucket) error {
	dir := filepath.Join(s.dir, name, "o")
	files, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	for _, f := range files {
		p := filepath.Join(dir, f.Name())
		if strings.HasPrefix(f.Name(), ".tmp") {
			os.Remove(p) // a write a crash cut short
			continue
		}
		fh, err := os.Open(p)
		if err != nil {
			return err
		}
		e, _, err := readTrailer(fh)
		fh.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		b.objects[e.Key] = e
	}
	return nil
}

func (s *Store) loadUploads(name string) error {
	dir := filepath.Join(s.dir, name, "u")
	ups, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	for _, d := range ups {
		data, err := os.ReadFile(filepath.Join(dir, d.Name(), "upload.json"))
		if err != nil {
			os.RemoveAll(filepath.Join(dir, d.Name())) // its creation did not finish
			continue
		}
		u := &upload{id: gofakes3.UploadID(d.Name()), parts: map[int]*entry{}}
		if err := json.Unmarshal(data, u); err != nil {
			return err
		}
		parts, _ := os.ReadDir(filepath.Join(dir, d.Name()))
		for _, p := range parts {
			n, err := strconv.Atoi(p.Name())
			if err != nil {
				continue
			}
			fh, err := os.Open(filepath.Join(dir, d.Name(), p.Name()))
			if err != nil {
				return err
			}
			e, _, err := readTrailer(fh)
			fh.Close()
			if err == nil {
				u.parts[n] = e
			}
		}
		s.uploads[u.id] = u
	}
	return nil
}

// objectPath is where an object's file is: keys may be up to 1,024 bytes and hold any
// character, so the file is named by the key's hash and the key kept in the trailer.
func (s *Store) objectPath(bucketName, key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(s.dir, bucketName, "o", hex.EncodeToString(sum[:]))
}

// writeFile streams r into a new file in dir, adds the trailer of e (its size and MD5
// filled in from what was written), syncs it, and returns its path, for the caller to
// rename into place. want, if not -1, is the size r must have.
func writeFile(dir string, r io.Reader, want int64, e *entry) (string, error) {
	f, err := os.CreateTemp(dir, ".tmp")
	if err != nil {
		return "", err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	h := md5.New()
	n, err := io.Copy(io.MultiWriter(f, h), r)
	if err != nil {
		return "", err
	}
	if want >= 0 && n != want {
		return "", gofakes3.ErrIncompleteBody
	}
	e.Size, e.MD5 = n, h.Sum(nil)
	if err := appendTrailer(f, e); err != nil {
		return "", err
	}
	if err := f.Sync(); err != nil {
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	ok = true
	return f.Name(), nil
}

func appendTrailer(w io.Writer, e *entry) error {
	t, err := json.Marshal(e)
	if err != nil {
		return err
	}
	t = binary.BigEndian.AppendUint64(t, uint64(len(t)))
	_, err = w.Write(t)
	return err
}

// readTrailer reads an object file's trailer; the object's bytes are f's first e.Size.
func readTrailer(f *os.File) (*entry, int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	var n [8]byte
	if fi.Size() < 8 {
		return nil, 0, errors.New("not an object file: too short")
	}
	if _, err := f.ReadAt(n[:], fi.Size()-8); err != nil {
		return nil, 0, err
	}
	tl := int64(binary.BigEndian.Uint64(n[:]))
	if tl <= 0 || tl > fi.Size()-8 || tl > 1<<20 {
		return nil, 0, errors.New("not an object file: bad trailer length")
	}
	buf := make([]byte, tl)
	if _, err := f.ReadAt(buf, fi.Size()-8-tl); err != nil {
		return nil, 0, err
	}
	e := &entry{}
	if err := json.Unmarshal(buf, e); err != nil {
		return nil, 0, fmt.Errorf("not an object file: %w", err)
	}
	if e.Size != fi.Size()-8-tl {
		return nil, 0, errors.New("not an object file: its size does not match its trailer")
	}
	return e, fi.Size(), nil
}

// keptMeta keeps of a request's headers what S3 gives back with the object: its content
// headers and user metadata, not the request's signing and checksum headers.
func keptMeta(meta map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range meta {
		switch {
		case strings.HasPrefix(k, "X-Amz-Meta-"), k == "Content-Type", k == "Content-Disposition",
			k == "Content-Encoding", k == "Cache-Control", k == "Content-Language":
			out[k] = v
		}
	}
	return out
}

// ListBuckets lists the buckets by name.
func (s *Store) ListBuckets() ([]gofakes3.BucketInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []gofakes3.BucketInfo
	for _, name := range slices.Sorted(maps.Keys(s.buckets)) {
		out = append(out, gofakes3.BucketInfo{Name: name, CreationDate: gofakes3.NewContentTime(s.buckets[name].Created)})
	}
	return out, nil
}

// CreateBucket makes the bucket's folder and its record.
func (s *Store) CreateBucket(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.buckets[name] != nil {
		return gofakes3.ResourceError(gofakes3.ErrBucketAlreadyExists, name)
	}
	dir := filepath.Join(s.dir, name)
	for _, d := range []string{dir, filepath.Join(dir, "o"), filepath.Join(dir, "u")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	b := &bucket{Created: s.now().UTC().Truncate(time.Millisecond), objects: map[string]*entry{}}
	data, _ := json.Marshal(b)
	if err := syncfile.Replace(filepath.Join(dir, "bucket.json"), data, 0o600); err != nil {
		return err
	}
	if err := syncfile.Dir(dir); err != nil {
		return err
	}
	if err := syncfile.Dir(s.dir); err != nil {
		return err
	}
	s.buckets[name] = b
	return nil
}

// BucketExists says whether the bucket exists.
func (s *Store) BucketExists(name string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buckets[name] != nil, nil
}

// DeleteBucket removes an empty bucket.
func (s *Store) DeleteBucket(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.buckets[name]
	if b == nil {
		return gofakes3.BucketNotFound(name)
	}
	if len(b.objects) > 0 {
		return gofakes3.ResourceError(gofakes3.ErrBucketNotEmpty, name)
	}
	return s.dropBucket(name)
}

// ForceDeleteBucket removes a bucket and everything in it.
func (s *Store) ForceDeleteBucket(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.buckets[name] == nil {
		return gofakes3.BucketNotFound(name)
	}
	return s.dropBucket(name)
}

// dropBucket removes the bucket's record first, so that a crash half-way leaves no
// bucket (Open skips a folder without one). Call with s.mu held.
func (s *Store) dropBucket(name string) error {
	dir := filepath.Join(s.dir, name)
	if err := os.Remove(filepath.Join(dir, "bucket.json")); err != nil {
		return err
	}
	for id, u := range s.uploads {
		if u.Bucket == name {
			delete(s.uploads, id)
		}
	}
	delete(s.buckets, name)
	return os.RemoveAll(dir)
}

// ListBucket lists a page of a bucket's keys after page.Marker, with the prefix, and
// with the delimiter's common prefixes, as S3 does.
func (s *Store) ListBucket(name string, prefix *gofakes3.Prefix, page gofakes3.ListBucketPage) (*gofakes3.ObjectList, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.buckets[name]
	if b == nil {
		return nil, gofakes3.BucketNotFound(name)
	}
	if b.sorted == nil {
		b.sorted = slices.Sorted(maps.Keys(b.objects))
	}
	var p, delim string
	if prefix != nil {
		if prefix.HasPrefix {
			p = prefix.Prefix
		}
		if prefix.HasDelimiter {
			delim = prefix.Delimiter
		}
	}
	limit := page.MaxKeys
	if limit <= 0 {
		limit = gofakes3.DefaultMaxBucketKeys
	}
	start, _ := slices.BinarySearch(b.sorted, p)
	if page.HasMarker {
		i, found := slices.BinarySearch(b.sorted, page.Marker)
		if found {
			i++
		}
		start = max(start, i)
	}
	out := gofakes3.NewObjectList()
	var n int64
	last := ""
	for i := start; i < len(b.sorted); i++ {
		key := b.sorted[i]
		if !strings.HasPrefix(key, p) {
			break
		}
		if delim != "" {
			if j := strings.Index(key[len(p):], delim); j >= 0 {
				cp := key[:len(p)+j+len(delim)]
				if !page.HasMarker || cp > page.Marker { // else shown on an earlier page
					if n == limit {
						out.IsTruncated, out.NextMarker = true, last
						break
					}
					out.AddPrefix(cp)
					n++
					last = cp
				}
				// Skip the rest of the keys under this common prefix (UTF-8 has no 0xff).
				k, _ := slices.BinarySearch(b.sorted, cp+"\xff")
				i = k - 1
				continue
			}
		}
		if n == limit {
			out.IsTruncated, out.NextMarker = true, last
			break
		}
		e := b.objects[key]
		out.Add(&gofakes3.Content{Key: key, LastModified: gofakes3.NewContentTime(e.Modified), ETag: e.etag(), Size: e.Size, StorageClass: "STANDARD"})
		n++
		last = key
	}
	return out, nil
}

// GetObject opens an object, or the range of it asked for.
func (s *Store) GetObject(bucketName, key string, rangeRequest *gofakes3.ObjectRangeRequest) (*gofakes3.Object, error) {
	return s.open(bucketName, key, rangeRequest, false)
}

// HeadObject is an object's size and metadata.
func (s *Store) HeadObject(bucketName, key string) (*gofakes3.Object, error) {
	return s.open(bucketName, key, nil, true)
}

func (s *Store) open(bucketName, key string, rr *gofakes3.ObjectRangeRequest, head bool) (*gofakes3.Object, error) {
	s.mu.Lock()
	b := s.buckets[bucketName]
	s.mu.Unlock()
	if b == nil {
		return nil, gofakes3.BucketNotFound(bucketName)
	}
	// The file is opened outside the lock: a write that renames over it meanwhile
	// leaves this reader the whole of the old object.
	f, err := os.Open(s.objectPath(bucketName, key))
	if errors.Is(err, os.ErrNotExist) {
		return nil, gofakes3.KeyNotFound(key)
	} else if err != nil {
		return nil, err
	}
	e, _, err := readTrailer(f)
	if err != nil || e.Key != key {
		f.Close()
		if err == nil {
			err = fmt.Errorf("object file %s holds key %q, not %q", f.Name(), e.Key, key)
		}
		return nil, err
	}
	meta := maps.Clone(e.Meta)
	if meta == nil {
		meta = map[string]string{}
	}
	meta["Last-Modified"] = e.Modified.UTC().Format(http1123)
	obj := &gofakes3.Object{Name: key, Metadata: meta, Size: e.Size, Hash: e.MD5}
	if head {
		f.Close()
		obj.Contents = io.NopCloser(bytes.NewReader(nil))
		return obj, nil
	}
	rng, err := rr.Range(e.Size)
	if err != nil {
		f.Close()
		return nil, err
	}
	start, length := int64(0), e.Size
	if rng != nil {
		start, length = rng.Start, rng.Length
	}
	obj.Range = rng
	obj.Contents = &section{SectionReader: io.NewSectionReader(f, start, length), f: f}
	return obj, nil
}

// http1123 is the time format of HTTP headers (Last-Modified).
const http1123 = "Mon, 02 Jan 2006 15:04:05 GMT"

type section struct {
	*io.SectionReader
	f *os.File
}

func (s *section) Close() error { return s.f.Close() }

// PutObject writes the object whole, then renames it into place.
func (s *Store) PutObject(bucketName, key string, meta map[string]string, input io.Reader, size int64, conditions *gofakes3.PutConditions) (gofakes3.PutObjectResult, error) {
	s.mu.Lock()
	b := s.buckets[bucketName]
	s.mu.Unlock()
	if b == nil {
		return gofakes3.PutObjectResult{}, gofakes3.BucketNotFound(bucketName)
	}
	e := &entry{Key: key, Meta: keptMeta(meta), Modified: s.now().UTC().Truncate(time.Millisecond)}
	tmp, err := writeFile(filepath.Join(s.dir, bucketName, "o"), input, size, e)
	if err != nil {
		return gofakes3.PutObjectResult{}, err
	}
	return gofakes3.PutObjectResult{}, s.install(bucketName, tmp, e, conditions)
}

// install renames a written object file into place and indexes it, if the conditions
// hold against the object it replaces.
func (s *Store) install(bucketName, tmp string, e *entry, conditions *gofakes3.PutConditions) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.buckets[bucketName]
	if b == nil {
		os.Remove(tmp)
		return gofakes3.BucketNotFound(bucketName)
	}
	if conditions != nil {
		var info *gofakes3.ConditionalObjectInfo
		if old := b.objects[e.Key]; old != nil {
			info = &gofakes3.ConditionalObjectInfo{Exists: true, Hash: old.MD5}
		}
		if err := gofakes3.CheckPutConditions(conditions, info); err != nil {
			os.Remove(tmp)
			return err
		}
	}
	if err := os.Rename(tmp, s.objectPath(bucketName, e.Key)); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := syncfile.Dir(filepath.Dir(tmp)); err != nil {
		return err
	}
	if b.objects[e.Key] == nil {
		b.sorted = nil
	}
	b.objects[e.Key] = e
	return nil
}

// DeleteObject removes an object; one that does not exist is no error.
func (s *Store) DeleteObject(bucketName, key string) (gofakes3.ObjectDeleteResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return gofakes3.ObjectDeleteResult{}, s.deleteLocked(bucketName, key)
}

func (s *Store) deleteLocked(bucketName, key string) error {
	b := s.buckets[bucketName]
	if b == nil {
		return gofakes3.BucketNotFound(bucketName)
	}
	if b.objects[key] == nil {
		return nil
	}
	p := s.objectPath(bucketName, key)
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := syncfile.Dir(filepath.Dir(p)); err != nil {
		return err
	}
	delete(b.objects, key)
	b.sorted = nil
	return nil
}

// DeleteMulti removes several objects, each with its own result.
func (s *Store) DeleteMulti(bucketName string, keys ...string) (gofakes3.MultiDeleteResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var res gofakes3.MultiDeleteResult
	if s.buckets[bucketName] == nil {
		return res, gofakes3.BucketNotFound(bucketName)
	}
	for _, k := range keys {
		if err := s.deleteLocked(bucketName, k); err != nil {
			res.Error = append(res.Error, gofakes3.ErrorResult{Key: k, Code: gofakes3.ErrInternal, Message: err.Error()})
			continue
		}
		res.Deleted = append(res.Deleted, gofakes3.ObjectID{Key: k})
	}
	return res, nil
}

// CopyObject copies an object's bytes to a new key, with new metadata.
func (s *Store) CopyObject(srcBucket, srcKey, dstBucket, dstKey string, meta map[string]string) (gofakes3.CopyObjectResult, error) {
	src, err := s.GetObject(srcBucket, srcKey, nil)
	if err != nil {
		return gofakes3.CopyObjectResult{}, err
	}
	defer src.Contents.Close()
	if _, err := s.PutObject(dstBucket, dstKey, meta, src.Contents, src.Size, nil); err != nil {
		return gofakes3.CopyObjectResult{}, err
	}
	return gofakes3.CopyObjectResult{ETag: `"` + hex.EncodeToString(src.Hash) + `"`, LastModified: gofakes3.NewContentTime(s.now())}, nil
}

// CreateMultipartUpload starts an upload: a folder for its parts.
func (s *Store) CreateMultipartUpload(bucketName, key string, meta map[string]string) (gofakes3.UploadID, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.buckets[bucketName] == nil {
		return "", gofakes3.BucketNotFound(bucketName)
	}
	var r [16]byte
	rand.Read(r[:])
	u := &upload{Bucket: bucketName, Key: key, Meta: keptMeta(meta), Initiated: s.now().UTC(), id: gofakes3.UploadID(hex.EncodeToString(r[:])), parts: map[int]*entry{}}
	dir := filepath.Join(s.dir, bucketName, "u", string(u.id))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	data, _ := json.Marshal(u)
	if err := syncfile.Replace(filepath.Join(dir, "upload.json"), data, 0o600); err != nil {
		return "", err
	}
	s.uploads[u.id] = u
	return u.id, nil
}

func (s *Store) upload(bucketName, key string, id gofakes3.UploadID) (*upload, error) {
	u := s.uploads[id]
	if u == nil || u.Bucket != bucketName || u.Key != key {
		return nil, gofakes3.ErrNoSuchUpload
	}
	return u, nil
}

// UploadPart writes a part to a file of its own; the same number again replaces it.
func (s *Store) UploadPart(bucketName, key string, id gofakes3.UploadID, partNumber int, contentLength int64, input io.Reader) (string, error) {
	s.mu.Lock()
	_, err := s.upload(bucketName, key, id)
	s.mu.Unlock()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(s.dir, bucketName, "u", string(id))
	e := &entry{Key: strconv.Itoa(partNumber), Modified: s.now().UTC()}
	tmp, err := writeFile(dir, input, contentLength, e)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	u, err := s.upload(bucketName, key, id)
	if err != nil {
		os.Remove(tmp)
		return "", err
	}
	if err := os.Rename(tmp, filepath.Join(dir, strconv.Itoa(partNumber))); err != nil {
		return "", err
	}
	u.parts[partNumber] = e
	return e.etag(), nil
}

// ListMultipartUploads lists the uploads in progress in a bucket.
func (s *Store) ListMultipartUploads(bucketName string, marker *gofakes3.UploadListMarker, prefix gofakes3.Prefix, limit int64) (*gofakes3.ListMultipartUploadsResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.buckets[bucketName] == nil {
		return nil, gofakes3.BucketNotFound(bucketName)
	}
	res := &gofakes3.ListMultipartUploadsResult{Bucket: bucketName, MaxUploads: limit, Prefix: prefix.Prefix}
	var ups []*upload
	for _, u := range s.uploads {
		if u.Bucket == bucketName && strings.HasPrefix(u.Key, prefix.Prefix) {
			ups = append(ups, u)
		}
	}
	slices.SortFunc(ups, func(a, b *upload) int {
		return cmp.Or(strings.Compare(a.Key, b.Key), strings.Compare(string(a.id), string(b.id)))
	})
	for _, u := range ups {
		if marker != nil && (u.Key < marker.Object || u.Key == marker.Object && u.id <= marker.UploadID) {
			continue
		}
		if limit > 0 && int64(len(res.Uploads)) == limit {
			res.IsTruncated = true
			last := res.Uploads[len(res.Uploads)-1]
			res.NextKeyMarker, res.NextUploadIDMarker = last.Key, last.UploadID
			break
		}
		res.Uploads = append(res.Uploads, gofakes3.ListMultipartUploadItem{Key: u.Key, UploadID: u.id, StorageClass: "STANDARD", Initiated: gofakes3.NewContentTime(u.Initiated)})
	}
	return res, nil
}

// ListParts lists an upload's parts after marker.
func (s *Store) ListParts(bucketName, key string, id gofakes3.UploadID, marker int, limit int64) (*gofakes3.ListMultipartUploadPartsResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, err := s.upload(bucketName, key, id)
	if err != nil {
		return nil, err
	}
	res := &gofakes3.ListMultipartUploadPartsResult{Bucket: bucketName, Key: key, UploadID: id, PartNumberMarker: marker, MaxParts: limit}
	for _, n := range slices.Sorted(maps.Keys(u.parts)) {
		if n <= marker {
			continue
		}
		if limit > 0 && int64(len(res.Parts)) == limit {
			res.IsTruncated = true
			res.NextPartNumberMarker = res.Parts[len(res.Parts)-1].PartNumber
			break
		}
		p := u.parts[n]
		res.Parts = append(res.Parts, gofakes3.ListMultipartUploadPartItem{PartNumber: n, LastModified: gofakes3.NewContentTime(p.Modified), ETag: p.etag(), Size: p.Size})
	}
	return res, nil
}

// AbortMultipartUpload drops an upload and its parts.
func (s *Store) AbortMultipartUpload(bucketName, key string, id gofakes3.UploadID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.upload(bucketName, key, id); err != nil {
		return err
	}
	delete(s.uploads, id)
	return os.RemoveAll(filepath.Join(s.dir, bucketName, "u", string(id)))
}

// minPartSize is S3's smallest part but the last.
const minPartSize = 5 << 20

// CompleteMultipartUpload joins the parts named, in order, into the object.
func (s *Store) CompleteMultipartUpload(bucketName, key string, id gofakes3.UploadID, in *gofakes3.CompleteMultipartUploadRequest) (gofakes3.VersionID, string, error) {
	s.mu.Lock()
	u, err := s.upload(bucketName, key, id)
	var parts []*entry
	if err == nil {
		for i, p := range in.Parts {
			e := u.parts[p.PartNumber]
			if e == nil || strings.Trim(p.ETag, `"`) != strings.Trim(e.etag(), `"`) {
				err = gofakes3.ErrInvalidPart
				break
			}
			if i > 0 && p.PartNumber <= in.Parts[i-1].PartNumber {
				err = gofakes3.ErrInvalidPartOrder
				break
			}
			if i < len(in.Parts)-1 && e.Size < minPartSize {
				err = gofakes3.ErrorMessagef(gofakes3.ErrInvalidPart, "part %d is %d bytes: every part but the last must be at least 5 MiB (EntityTooSmall)", p.PartNumber, e.Size)
				break
			}
			parts = append(parts, e)
		}
		if err == nil && len(parts) == 0 {
			err = gofakes3.ErrorMessage(gofakes3.ErrMalformedXML, "CompleteMultipartUpload names no part")
		}
	}
	s.mu.Unlock()
	if err != nil {
		return "", "", err
	}
	dir := filepath.Join(s.dir, bucketName, "u", string(id))
	var readers []io.Reader
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	sums := md5.New()
	for i, p := range parts {
		f, err := os.Open(filepath.Join(dir, strconv.Itoa(in.Parts[i].PartNumber)))
		if err != nil {
			return "", "", err
		}
		files = append(files, f)
		readers = append(readers, io.NewSectionReader(f, 0, p.Size))
		sums.Write(p.MD5)
	}
	e := &entry{Key: key, Meta: u.Meta, Modified: s.now().UTC().Truncate(time.Millisecond)}
	tmp, err := writeFile(filepath.Join(s.dir, bucketName, "o"), io.MultiReader(readers...), -1, e)
	if err != nil {
		return "", "", err
	}
	e.MD5, e.Parts = sums.Sum(nil), len(parts)
	// The trailer was written with the whole object's MD5; write it again with the
	// parts' (as S3's ETag of a multipart object is), before the rename.
	if err := rewriteTrailer(tmp, e); err != nil {
		os.Remove(tmp)
		return "", "", err
	}
	s.mu.Lock()
	if _, err := s.upload(bucketName, key, id); err != nil {
		s.mu.Unlock()
		os.Remove(tmp)
		return "", "", err
	}
	delete(s.uploads, id)
	s.mu.Unlock()
	if err := s.install(bucketName, tmp, e, nil); err != nil {
		return "", "", err
	}
	os.RemoveAll(dir)
	return "", e.etag(), nil
}

// rewriteTrailer replaces the trailer of a written, not yet installed, object file.
func rewriteTrailer(path string, e *entry) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(e.Size); err != nil {
		return err
	}
	if _, err := f.Seek(e.Size, io.SeekStart); err != nil {
		return err
	}
	if err := appendTrailer(f, e); err != nil {
		return err
	}
	return f.Sync()
}
