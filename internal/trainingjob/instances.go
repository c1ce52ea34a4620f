package trainingjob

// Size is what one instance of a SageMaker training instance type has.
type Size struct {
	GPUs, VCPUs int
	MemoryGiB   int
}

// InstanceTypes is the built-in table of SageMaker training instance types. The local
// executor takes the GPU counts from it, the Kubernetes executor the Pod's requests;
// both let their configuration add types or override these.
var InstanceTypes = map[string]Size{
	"ml.m5.large": {0, 2, 8}, "ml.m5.xlarge": {0, 4, 16}, "ml.m5.2xlarge": {0, 8, 32}, "ml.m5.4xlarge": {0, 16, 64},
	"ml.c5.xlarge": {0, 4, 8}, "ml.c5.2xlarge": {0, 8, 16}, "ml.c5.4xlarge": {0, 16, 32},

	"ml.g4dn.xlarge": {1, 4, 16}, "ml.g4dn.2xlarge": {1, 8, 32}, "ml.g4dn.4xlarge": {1, 16, 64},
	"ml.g4dn.8xlarge": {1, 32, 128}, "ml.g4dn.12xlarge": {4, 48, 192}, "ml.g4dn.16xlarge": {1, 64, 256},

	"ml.g5.xlarge": {1, 4, 16}, "ml.g5.2xlarge": {1, 8, 32}, "ml.g5.4xlarge": {1, 16, 64}, "ml.g5.8xlarge": {1, 32, 128},
	"ml.g5.12xlarge": {4, 48, 192}, "ml.g5.16xlarge": {1, 64, 256}, "ml.g5.24xlarge": {4, 96, 384}, "ml.g5.48xlarge": {8, 192, 768},

	"ml.g6.xlarge": {1, 4, 16}, "ml.g6.2xlarge": {1, 8, 32}, "ml.g6.4xlarge": {1, 16, 64}, "ml.g6.8xlarge": {1, 32, 128},
	"ml.g6.12xlarge": {4, 48, 192}, "ml.g6.16xlarge": {1, 64, 256}, "ml.g6.24xlarge": {4, 96, 384}, "ml.g6.48xlarge": {8, 192, 768},

	"ml.g6e.xlarge": {1, 4, 32}, "ml.g6e.12xlarge": {4, 48, 384}, "ml.g6e.48xlarge": {8, 192, 1536},

	"ml.p3.2xlarge": {1, 8, 61}, "ml.p3.8xlarge": {4, 32, 244}, "ml.p3.16xlarge": {8, 64, 488}, "ml.p3dn.24xlarge": {8, 96, 768},
	"ml.p4d.24xlarge": {8, 96, 1152}, "ml.p4de.24xlarge": {8, 96, 1152},
	"ml.p5.48xlarge": {8, 192, 2048}, "ml.p5e.48xlarge": {8, 192, 2048}, "ml.p5en.48xlarge": {8, 192, 2048},
}

// GPUsPer returns how many GPUs one instance of the type has: table's count when it names
// the type (a server's --gpu-table), else the built-in InstanceTypes' (0 if unknown).
func GPUsPer(table map[string]int, instanceType string) int {
	if n, ok := table[instanceType]; ok {
		return n
	}
	return InstanceTypes[instanceType].GPUs
}
