package ordered

// Treap is an ordered set with O(log n) insert, delete and successor, used for the small
// sets of active attempts in victim order. The node priorities come from a xorshift
// generator owned by the treap, so two schedulers fed the same events build the same trees
// (no global randomness, SPEC invariant 8).
//
// Each node keeps a copy of its item's sort key, so a descent compares keys held in the
// nodes instead of following a pointer per comparison. An item's key must not change while
// it is in the treap: delete it, change it, insert it again.
type Treap[K, T any] struct {
	root  *tnode[K, T]
	cmp   func(a, b K) int
	keyOf func(T) K
	rng   uint64
	n     int
}

type tnode[K, T any] struct {
	key         K
	item        T
	left, right *tnode[K, T]
	pri         uint32
}

func NewTreap[K, T any](keyOf func(T) K, cmp func(a, b K) int) *Treap[K, T] {
	return &Treap[K, T]{cmp: cmp, keyOf: keyOf, rng: 0x9E3779B97F4A7C15}
}

func (t *Treap[K, T]) next() uint32 {
	t.rng ^= t.rng << 13
	t.rng ^= t.rng >> 7
	t.rng ^= t.rng << 17
	return uint32(t.rng >> 32)
}

// Len returns the number of items.
func (t *Treap[K, T]) Len() int { return t.n }

// split divides n into the items less than key (l) and the rest (r).
func (t *Treap[K, T]) split(n *tnode[K, T], key K) (l, r *tnode[K, T]) {
	if n == nil {
		return nil, nil
	}
	if t.cmp(n.key, key) < 0 {
		n.right, r = t.split(n.right, key)
		return n, r
	}
	l, n.left = t.split(n.left, key)
	return l, n
}

func merge[K, T any](l, r *tnode[K, T]) *tnode[K, T] {
	if l == nil {
		return r
	}
	if r == nil {
		return l
	}
	if l.pri > r.pri {
		l.right = merge(l.right, r)
		return l
	}
	r.left = merge(l, r.left)
	return r
}

// Insert adds item; an item whose key equals one present is a caller bug.
func (t *Treap[K, T]) Insert(item T) {
	nn := &tnode[K, T]{key: t.keyOf(item), item: item, pri: t.next()}
	// Descend while the existing nodes have higher priority, then split there.
	link := &t.root
	for *link != nil && (*link).pri > nn.pri {
		if t.cmp(nn.key, (*link).key) < 0 {
			link = &(*link).left
		} else {
			link = &(*link).right
		}
	}
	nn.left, nn.right = t.split(*link, nn.key)
	*link = nn
	t.n++
}

// Delete removes the item whose key equals item's and reports whether it was there.
func (t *Treap[K, T]) Delete(item T) bool {
	key := t.keyOf(item)
	link := &t.root
	for *link != nil {
		n := *link
		c := t.cmp(key, n.key)
		if c == 0 {
			*link = merge(n.left, n.right)
			t.n--
			return true
		}
		if c < 0 {
			link = &n.left
		} else {
			link = &n.right
		}
	}
	return false
}

// Min returns the smallest item.
func (t *Treap[K, T]) Min() (T, bool) {
	n := t.root
	if n == nil {
		var zero T
		return zero, false
	}
	for n.left != nil {
		n = n.left
	}
	return n.item, true
}

// After returns the smallest item greater than item.
func (t *Treap[K, T]) After(item T) (T, bool) {
	key := t.keyOf(item)
	var best *tnode[K, T]
	for n := t.root; n != nil; {
		if t.cmp(n.key, key) > 0 {
			best = n
			n = n.left
		} else {
			n = n.right
		}
	}
	if best == nil {
		var zero T
		return zero, false
	}
	return best.item, true
}

// Ascend calls fn on the items in order until fn returns false.
func (t *Treap[K, T]) Ascend(fn func(T) bool) {
	var walk func(n *tnode[K, T]) bool
	walk = func(n *tnode[K, T]) bool {
		if n == nil {
			return true
		}
		return walk(n.left) && fn(n.item) && walk(n.right)
	}
	walk(t.root)
}
