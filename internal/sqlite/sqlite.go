// Package sqlite is the embedded default Store: one SQLite file (modernc.org/sqlite, pure
// Go) in the server's data folder, in WAL mode with synchronous=FULL, so that a committed
// batch survives a crash of the process and of the machine. It knows nothing of what the
// objects mean.
package sqlite

import (
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"

	"github.com/quotashare/quotashare"
)

// FileName is the database's name inside the data folder.
const FileName = "quotashare.db"

// migrations bring the schema from version i to i+1; their order never changes.
var migrations = []string{
	`CREATE TABLE objects (
		kind TEXT NOT NULL,
		key  TEXT NOT NULL,
		body BLOB NOT NULL,
		PRIMARY KEY (kind, key)
	) WITHOUT ROWID`,
}

// DB is a Store in one SQLite file.
type DB struct {
	db   *sql.DB
	path string
}

var _ quotashare.Store = (*DB)(nil)

// Open opens (creating if needed) the database in the data folder dir and brings its
// schema up to date.
func Open(dir string) (*DB, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("data folder: %w", err)
	}
	path := filepath.Join(dir, FileName)
	q := url.Values{}
	for _, p := range []string{"journal_mode(WAL)", "synchronous(FULL)", "busy_timeout(5000)", "foreign_keys(1)"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1) // one writer; reads come from the server's memory
	d := &DB{db: db, path: path}
	if err := d.migrate(); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

func (d *DB) migrate() error {
	var v int
	if err := d.db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil {
		return err
	}
	if v > len(migrations) {
		return fmt.Errorf("schema version %d is newer than this quotashare knows (%d): upgrade quotashare", v, len(migrations))
	}
	for ; v < len(migrations); v++ {
		tx, err := d.db.Begin()
		if err != nil {
			return err
		}
		if _, err := tx.Exec(migrations[v]); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %d: %w", v+1, err)
		}
		if _, err := tx.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, v+1)); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// Load calls fn for every object, ordered by kind and key.
func (d *DB) Load(fn func(quotashare.Record) error) error {
	rows, err := d.db.Query(`SELECT kind, key, body FROM objects ORDER BY kind, key`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var r quotashare.Record
		if err := rows.Scan(&r.Kind, &r.Key, &r.Body); err != nil {
			return err
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Commit writes the batch in one transaction: an upsert per record, or a delete where
// the body is nil. It returns once the transaction is durable.
func (d *DB) Commit(batch []quotashare.Record) error {
	if len(batch) == 0 {
		return nil
	}
	tx, err := d.db.Begin()
	if err != nil {
		return err
	}
	put, err := tx.Prepare(`INSERT INTO objects (kind, key, body) VALUES (?, ?, ?)
		ON CONFLICT (kind, key) DO UPDATE SET body = excluded.body`)
	if err != nil {
		tx.Rollback()
		return err
	}
	defer put.Close()
	del, err := tx.Prepare(`DELETE FROM objects WHERE kind = ? AND key = ?`)
	if err != nil {
		tx.Rollback()
		return err
	}
	defer del.Close()
	for _, r := range batch {
		if r.Body == nil {
			_, err = del.Exec(r.Kind, r.Key)
		} else {
			_, err = put.Exec(r.Kind, r.Key, r.Body)
		}
		if err != nil {
			tx.Rollback()
			return fmt.Errorf("%s %s: %w", r.Kind, r.Key, err)
		}
	}
	return tx.Commit()
}

// Close closes the database.
func (d *DB) Close() error { return d.db.Close() }
