package control

// Viewer is a runner's read side: View calls fn with the state locked, at the runner's
// clock's time; fn must not change the state.
type Viewer interface {
	View(fn func(*State) error) error
}

// Updater is a runner's write side as well: Update calls fn with the state locked, at the
// runner's clock's time, and returns once what fn changed is durable (at once when fn
// changed nothing or failed). These two are the only ways into a running State: a request
// is a function of the State's own commands and queries, so a new command needs no
// forwarding method anywhere between the wire and here.
type Updater interface {
	Viewer
	Update(fn func(*State) error) error
}

// Get runs a query that returns a value, through v.View.
func Get[T any](v Viewer, fn func(*State) (T, error)) (T, error) {
	var out T
	err := v.View(func(s *State) (err error) {
		out, err = fn(s)
		return err
	})
	return out, err
}

// Do runs a command that returns a value, through u.Update: the value once it is durable.
func Do[T any](u Updater, fn func(*State) (T, error)) (T, error) {
	var out T
	err := u.Update(func(s *State) (err error) {
		out, err = fn(s)
		return err
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return out, nil
}
