package sched

import "slices"

// btree is an ordered set like treap, laid out for a large queue: up to btreeMax keys per
// node, held inline, so an operation on a share's queue of a million jobs touches a
// handful of nodes instead of twenty-odd scattered ones. Internal nodes keep each child's
// lower bound and item count (for Rank). Nodes that fall below a quarter full are merged
// with a neighbour when the two fit in one.
type btree[K, T any] struct {
	root  *bnode[K, T]
	cmp   func(a, b K) int
	keyOf func(T) K
	size  int
}

const btreeMax = 32

type bnode[K, T any] struct {
	keys     []K // leaf: the items' keys; internal: keys[i] bounds child i from below (keys[0] unused)
	items    []T // leaf only
	children []*bnode[K, T]
	counts   []int // items under each child
}

func newBTree[K, T any](keyOf func(T) K, cmp func(a, b K) int) *btree[K, T] {
	return &btree[K, T]{cmp: cmp, keyOf: keyOf, root: &bnode[K, T]{}}
}

func (n *bnode[K, T]) leaf() bool { return n.children == nil }

func (n *bnode[K, T]) count() int {
	if n.leaf() {
		return len(n.keys)
	}
	c := 0
	for _, x := range n.counts {
		c += x
	}
	return c
}

// search returns the first index in a leaf whose key is >= key, and whether it is equal.
func (t *btree[K, T]) search(n *bnode[K, T], key K) (int, bool) {
	return slices.BinarySearchFunc(n.keys, key, t.cmp)
}

// child returns the index of the child of internal node n whose range holds key.
func (t *btree[K, T]) child(n *bnode[K, T], key K) int {
	lo, hi := 1, len(n.children)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if t.cmp(n.keys[m], key) <= 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo - 1
}

// Len returns the number of items.
func (t *btree[K, T]) Len() int { return t.size }

// Insert adds item; an item whose key equals one present is a caller bug.
func (t *btree[K, T]) Insert(item T) {
	key := t.keyOf(item)
	if right := t.insert(t.root, key, item); right != nil {
		old := t.root
		t.root = &bnode[K, T]{keys: []K{old.keys[0], right.keys[0]}, children: []*bnode[K, T]{old, right},
			counts: []int{old.count(), right.count()}}
	}
	t.size++
}

// insert adds the item under n and returns n's new right sibling if n had to split.
func (t *btree[K, T]) insert(n *bnode[K, T], key K, item T) *bnode[K, T] {
	if n.leaf() {
		i, _ := t.search(n, key)
		n.keys = slices.Insert(n.keys, i, key)
		n.items = slices.Insert(n.items, i, item)
		if len(n.keys) <= btreeMax {
			return nil
		}
		h := len(n.keys) / 2
		right := &bnode[K, T]{keys: slices.Clone(n.keys[h:]), items: slices.Clone(n.items[h:])}
		clear(n.items[h:]) // drop the references the left half no longer holds
		n.keys, n.items = n.keys[:h], n.items[:h]
		return right
	}
	i := t.child(n, key)
	n.counts[i]++
	r := t.insert(n.children[i], key, item)
	if r == nil {
		return nil
	}
	n.counts[i] = n.children[i].count()
	n.keys = slices.Insert(n.keys, i+1, r.keys[0])
	n.children = slices.Insert(n.children, i+1, r)
	n.counts = slices.Insert(n.counts, i+1, r.count())
	if len(n.children) <= btreeMax {
		return nil
	}
	h := len(n.children) / 2
	right := &bnode[K, T]{keys: slices.Clone(n.keys[h:]), children: slices.Clone(n.children[h:]), counts: slices.Clone(n.counts[h:])}
	clear(n.children[h:])
	n.keys, n.children, n.counts = n.keys[:h], n.children[:h], n.counts[:h]
	return right
}

// Delete removes the item whose key equals item's and reports whether it was there.
func (t *btree[K, T]) Delete(item T) bool {
	if !t.delete(t.root, t.keyOf(item)) {
		return false
	}
	t.size--
	for !t.root.leaf() && len(t.root.children) == 1 {
		t.root = t.root.children[0]
	}
	if !t.root.leaf() && len(t.root.children) == 0 {
		t.root = &bnode[K, T]{}
	}
	return true
}

func (t *btree[K, T]) delete(n *bnode[K, T], key K) bool {
	if n.leaf() {
		i, found := t.search(n, key)
		if !found {
			return false
		}
		n.keys = slices.Delete(n.keys, i, i+1)
		n.items = slices.Delete(n.items, i, i+1)
		return true
	}
	i := t.child(n, key)
	if !t.delete(n.children[i], key) {
		return false
	}
	n.counts[i]--
	c := n.children[i]
	switch {
	case n.counts[i] == 0:
		t.remove(n, i)
	case c.width() < btreeMax/4:
		if i+1 < len(n.children) && c.width()+n.children[i+1].width() <= btreeMax {
			t.mergeRight(n, i)
		} else if i > 0 && c.width()+n.children[i-1].width() <= btreeMax {
			t.mergeRight(n, i-1)
		}
	}
	return true
}

func (n *bnode[K, T]) width() int { return len(n.keys) }

// remove unlinks child i of n.
func (t *btree[K, T]) remove(n *bnode[K, T], i int) {
	n.keys = slices.Delete(n.keys, i, i+1)
	n.children = slices.Delete(n.children, i, i+1)
	n.counts = slices.Delete(n.counts, i, i+1)
}

// mergeRight moves child i+1 of n into child i.
func (t *btree[K, T]) mergeRight(n *bnode[K, T], i int) {
	l, r := n.children[i], n.children[i+1]
	l.keys = append(l.keys, r.keys...)
	if l.leaf() {
		l.items = append(l.items, r.items...)
	} else {
		l.children = append(l.children, r.children...)
		l.counts = append(l.counts, r.counts...)
	}
	n.counts[i] += n.counts[i+1]
	t.remove(n, i+1)
}

// Min returns the smallest item.
func (t *btree[K, T]) Min() (T, bool) {
	n := t.root
	for !n.leaf() {
		n = n.children[0]
	}
	if len(n.items) == 0 {
		var zero T
		return zero, false
	}
	return n.items[0], true
}

// After returns the smallest item greater than item.
func (t *btree[K, T]) After(item T) (T, bool) {
	var next T
	found := false
	t.AscendAfter(item, func(x T) bool { next, found = x, true; return false })
	return next, found
}

// AscendAfter calls fn on the items greater than item, in order, until fn returns false.
func (t *btree[K, T]) AscendAfter(item T, fn func(T) bool) {
	t.ascendAfter(t.root, t.keyOf(item), fn)
}

func (t *btree[K, T]) ascendAfter(n *bnode[K, T], key K, fn func(T) bool) bool {
	if n.leaf() {
		i, found := t.search(n, key)
		if found {
			i++
		}
		for _, x := range n.items[i:] {
			if !fn(x) {
				return false
			}
		}
		return true
	}
	for i := t.child(n, key); i < len(n.children); i++ {
		if !t.ascendAfter(n.children[i], key, fn) {
			return false
		}
	}
	return true
}

// Ascend calls fn on the items in order until fn returns false.
func (t *btree[K, T]) Ascend(fn func(T) bool) { t.ascend(t.root, fn) }

func (t *btree[K, T]) ascend(n *bnode[K, T], fn func(T) bool) bool {
	if n.leaf() {
		for _, x := range n.items {
			if !fn(x) {
				return false
			}
		}
		return true
	}
	for _, c := range n.children {
		if !t.ascend(c, fn) {
			return false
		}
	}
	return true
}

// Rank returns how many items are less than item.
func (t *btree[K, T]) Rank(item T) int {
	key := t.keyOf(item)
	r := 0
	n := t.root
	for !n.leaf() {
		i := t.child(n, key)
		for _, c := range n.counts[:i] {
			r += c
		}
		n = n.children[i]
	}
	i, _ := t.search(n, key)
	return r + i
}
