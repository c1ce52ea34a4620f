package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
)

// TestFIFOCommands: submit without --share on a FIFO queue, and explain a job waiting
// there in the queue's terms, not a share's.
func TestFIFOCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	s := startServer(t, filepath.Join(t.TempDir(), "data"), "--quiet")
	c := sdk(s.url)
	ctx := context.Background()
	if _, err := c.CreateServiceEnvironment(ctx, &batch.CreateServiceEnvironmentInput{ServiceEnvironmentName: aws.String("fe"),
		ServiceEnvironmentType: types.ServiceEnvironmentTypeSagemakerTraining,
		CapacityLimits:         []types.CapacityLimit{{CapacityUnit: aws.String("NUM_INSTANCES"), MaxCapacity: aws.Int32(1)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateJobQueue(ctx, &batch.CreateJobQueueInput{JobQueueName: aws.String("fq"), Priority: aws.Int32(1),
		ServiceEnvironmentOrder: []types.ServiceEnvironmentOrder{{Order: aws.Int32(1), ServiceEnvironment: aws.String("fe")}}}); err != nil {
		t.Fatal(err)
	}
	_, mustRun := cli(t, s.url)
	mustRun("submit", "--queue", "fq", "--name", "big", "--count", "2", "--", "true")
	out := mustRun("explain", "big")
	for _, want := range []string{"big (FIFO queue, priority 0) waits for 2 x ml.g5.xlarge.", "Why: "} {
		if !strings.Contains(out, want) && !strings.Contains(flat(out), want) {
			t.Errorf("explain of a FIFO job lacks %q:\n%s", want, out)
		}
		if strings.Contains(out, "share") {
			t.Errorf("explain of a FIFO job speaks of a share:\n%s", out)
		}
	}
}
