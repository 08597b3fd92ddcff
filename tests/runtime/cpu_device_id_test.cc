#include "runtime/cpu/cpu_device_id.h"

#include <gtest/gtest.h>

namespace korch {
namespace {

TEST(DeviceId, FromCpuinfo) {
  const std::string cpuinfo =
      "processor\t: 0\n"
      "vendor_id\t: AuthenticAMD\n"
      "model name\t: AMD EPYC 9654   96-Core Processor\n"
      "flags\t\t: fpu sse2 avx avx2 fma avx512f avx512bw\n"
      "\n"
      "processor\t: 1\n"
      "model name\t: AMD EPYC 9654   96-Core Processor\n"
      "flags\t\t: fpu sse2 avx avx2 fma avx512f avx512bw\n";
  EXPECT_EQ(cpu_device_id_from_cpuinfo(cpuinfo, 16),
            "cpu:AMD EPYC 9654 96-Core Processor:16t:avx2+fma+avx512f");
}

TEST(DeviceId, NoAvxAndSeparatorsInModel) {
  const std::string cpuinfo = "model name : Odd:Chip|X\nflags : fpu sse2\n";
  EXPECT_EQ(cpu_device_id_from_cpuinfo(cpuinfo, 1), "cpu:Odd_Chip_X:1t:noavx2");
  EXPECT_EQ(cpu_device_id_from_cpuinfo("", 2), "cpu:unknown:2t:noavx2");
}

TEST(DeviceId, ThisMachineIsStable) {
  const std::string a = cpu_device_id(4);
  EXPECT_EQ(a, cpu_device_id(4));
  EXPECT_EQ(a.rfind("cpu:", 0), 0u) << a;
  EXPECT_NE(a.find(":4t:"), std::string::npos) << a;
  EXPECT_EQ(a.find('|'), std::string::npos) << a;
  EXPECT_NE(a, cpu_device_id(8));
}

TEST(DeviceId, MissingCpuFeatures) {
  const std::set<std::string> have = cpu_flags_from_cpuinfo("model name : X\nflags : fpu sse4_2 avx avx2 fma\n");
  EXPECT_EQ(have.count("avx2"), 1u);
  EXPECT_TRUE(missing_cpu_features(" avx avx2 fma", have).empty());
  EXPECT_EQ(missing_cpu_features(" avx2 avx512f  avx512bw", have), (std::vector<std::string>{"avx512f", "avx512bw"}));
  EXPECT_TRUE(missing_cpu_features("", {}).empty());
  // The probe names each extension by its compiler macro and its /proc/cpuinfo flag.
  const std::string probe = isa_probe_source();
  EXPECT_NE(probe.find(std::string("const char* ") + kIsaProbeSymbol + "()"), std::string::npos) << probe;
  EXPECT_NE(probe.find("#ifdef __AVX2__\n      \" avx2\"\n#endif"), std::string::npos) << probe;
  EXPECT_NE(probe.find("#ifdef __BMI__\n      \" bmi1\""), std::string::npos) << probe;
}

}  // namespace
}  // namespace korch
