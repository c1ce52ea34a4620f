package trainingjob

import "testing"

// TestSizesAreTrainingTypes: every type the size table knows is a SageMaker Training
// type, so that a type the executors can size is never refused in capacity limits.
func TestSizesAreTrainingTypes(t *testing.T) {
	for name := range InstanceTypes {
		if !IsTrainingType(name) {
			t.Errorf("%s has a size but is not in TrainingTypes", name)
		}
	}
	for _, bad := range []string{"ml.nosuch.type", "NUM_INSTANCES", "", "g5.xlarge"} {
		if IsTrainingType(bad) {
			t.Errorf("%q is taken as a training type", bad)
		}
	}
}
