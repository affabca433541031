#include "data/split.h"

#include <openssl/evp.h>

#include <cmath>
#include <string>

#include "util/error.h"

namespace sps {

Md5Digest md5(std::string_view bytes) {
  Md5Digest digest{};
  unsigned int size = 0;
  // Fetched once: EVP_md5() makes every EVP_Digest fetch the implementation again, under a
  // lock that threads hashing document ids contend for.
  static EVP_MD* const md5_method = EVP_MD_fetch(nullptr, "MD5", nullptr);
  SPS_ASSERT(md5_method != nullptr);
  const int ok = EVP_Digest(bytes.data(), bytes.size(), digest.data(), &size, md5_method, nullptr);
  SPS_ASSERT(ok == 1 && size == digest.size());
  return digest;
}

uint64_t split_hash(uint64_t seed, std::string_view id) {
  std::string key = std::to_string(seed);
  key += ':';
  key.append(id);
  const Md5Digest digest = md5(key);
  uint64_t h = 0;
  for (int i = 7; i >= 0; --i) h = (h << 8) | digest[i];
  return h;
}

SplitRule::SplitRule(uint64_t seed_, double val_fraction) : seed(seed_) {
  if (!(val_fraction >= 0.0 && val_fraction <= 1.0))
    fail("val fraction {} is outside [0, 1]", val_fraction);
  if (val_fraction >= 1.0) {
    all = true;
    return;
  }
  if (val_fraction == 0.0) return;  // threshold 0: no document is in val
  // val_fraction = m · 2^e exactly, with m an integer below 2^53, so val_fraction · 2^64 =
  // m · 2^(e + 64) exactly (as Python computes it), and the threshold is its floor.
  int exponent = 0;
  const double mantissa = std::frexp(val_fraction, &exponent);  // in [0.5, 1)
  const uint64_t m = static_cast<uint64_t>(std::ldexp(mantissa, 53));
  const int shift = exponent - 53 + 64;  // val_fraction · 2^64 = m · 2^shift
  if (shift >= 0) {
    threshold = m << shift;  // < 2^64 because val_fraction < 1
  } else if (-shift < 64) {
    threshold = m >> -shift;
  }  // else val_fraction · 2^64 < 1: threshold 0, no document is in val
}

}  // namespace sps
