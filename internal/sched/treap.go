package sched

// treap is an ordered set with O(log n) insert, delete, successor and rank. The node
// priorities come from a xorshift generator owned by the treap, so two schedulers fed the
// same events build the same trees (no global randomness, SPEC invariant 8).
type treap[T any] struct {
	root *tnode[T]
	cmp  func(a, b T) int
	rng  uint64
}

type tnode[T any] struct {
	item        T
	left, right *tnode[T]
	pri         uint32
	size        int32
}

func newTreap[T any](cmp func(a, b T) int) *treap[T] {
	return &treap[T]{cmp: cmp, rng: 0x9E3779B97F4A7C15}
}

func (t *treap[T]) next() uint32 {
	t.rng ^= t.rng << 13
	t.rng ^= t.rng >> 7
	t.rng ^= t.rng << 17
	return uint32(t.rng >> 32)
}

func size[T any](n *tnode[T]) int32 {
	if n == nil {
		return 0
	}
	return n.size
}

func (n *tnode[T]) fix() { n.size = 1 + size(n.left) + size(n.right) }

// Len returns the number of items.
func (t *treap[T]) Len() int { return int(size(t.root)) }

// split divides n into the items less than key (l) and the rest (r).
func (t *treap[T]) split(n *tnode[T], key T) (l, r *tnode[T]) {
	if n == nil {
		return nil, nil
	}
	if t.cmp(n.item, key) < 0 {
		n.right, r = t.split(n.right, key)
		n.fix()
		return n, r
	}
	l, n.left = t.split(n.left, key)
	n.fix()
	return l, n
}

func merge[T any](l, r *tnode[T]) *tnode[T] {
	if l == nil {
		return r
	}
	if r == nil {
		return l
	}
	if l.pri > r.pri {
		l.right = merge(l.right, r)
		l.fix()
		return l
	}
	r.left = merge(l, r.left)
	r.fix()
	return r
}

// Insert adds item; an item comparing equal to one present is a caller bug.
func (t *treap[T]) Insert(item T) {
	nn := &tnode[T]{item: item, pri: t.next(), size: 1}
	// Descend while the existing nodes have higher priority, then split there.
	link := &t.root
	for *link != nil && (*link).pri > nn.pri {
		n := *link
		n.size++
		if t.cmp(item, n.item) < 0 {
			link = &n.left
		} else {
			link = &n.right
		}
	}
	nn.left, nn.right = t.split(*link, item)
	nn.fix()
	*link = nn
}

// Delete removes the item comparing equal to item and reports whether it was there.
func (t *treap[T]) Delete(item T) bool {
	link := &t.root
	var path []*tnode[T]
	for *link != nil {
		n := *link
		c := t.cmp(item, n.item)
		if c == 0 {
			*link = merge(n.left, n.right)
			for _, p := range path {
				p.size--
			}
			return true
		}
		path = append(path, n)
		if c < 0 {
			link = &n.left
		} else {
			link = &n.right
		}
	}
	return false
}

// Min returns the smallest item.
func (t *treap[T]) Min() (T, bool) {
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

// After returns the smallest item greater than key.
func (t *treap[T]) After(key T) (T, bool) {
	var best *tnode[T]
	for n := t.root; n != nil; {
		if t.cmp(n.item, key) > 0 {
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

// Rank returns how many items are less than key.
func (t *treap[T]) Rank(key T) int {
	r := 0
	for n := t.root; n != nil; {
		if t.cmp(n.item, key) <= 0 {
			if t.cmp(n.item, key) == 0 {
				return r + int(size(n.left))
			}
			r += int(size(n.left)) + 1
			n = n.right
		} else {
			n = n.left
		}
	}
	return r
}

// Ascend calls fn on the items in order until fn returns false.
func (t *treap[T]) Ascend(fn func(T) bool) {
	var walk func(n *tnode[T]) bool
	walk = func(n *tnode[T]) bool {
		if n == nil {
			return true
		}
		return walk(n.left) && fn(n.item) && walk(n.right)
	}
	walk(t.root)
}
