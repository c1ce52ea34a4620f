package quotashare

// Record is one stored object: a resource or a job, as the server serialises it. A nil
// Body deletes the object.
type Record struct {
	Kind, Key string
	Body      []byte
}

// Store keeps the server's objects durably. Commit writes a batch in one transaction and
// returns only once it is durable; Load reads every object back, in key order per kind.
type Store interface {
	Load(fn func(r Record) error) error
	Commit(batch []Record) error
	Close() error
}
