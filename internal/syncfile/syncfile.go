// Package syncfile replaces small files durably: what the executor's journal and users'
// record and the object store's bucket and upload records are written with.
package syncfile

import "os"

// Replace replaces path with data (mode perm), durably: written and synced beside it
// (path.tmp), then renamed over it. A failure leaves the old file as it was and no
// temporary file. The rename itself is durable once the caller syncs the folder (Dir).
func Replace(path string, data []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// Dir syncs a folder, making a rename or a removal in it durable.
func Dir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
