package storetest_test

import (
	"testing"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/storetest"
)

func TestMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T) func() (quotashare.Store, error) {
		m := storetest.NewMemory()
		return func() (quotashare.Store, error) { return m.Open(), nil }
	})
}
