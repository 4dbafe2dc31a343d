// SPDX-License-Identifier: Apache-2.0
//
// net/test_certs.h
//
// For tests only: a throw-away CA and a serving certificate for 127.0.0.1 (IP SAN), made with
// the `openssl` command in a directory the test owns. Header-only so that tests of several
// libraries can use it without a library of its own.
#pragma once

#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>

namespace sb::net::testing {

struct TestCerts {
  std::string ca_file;    // PEM of the CA that signed cert_file
  std::string cert_file;  // serving certificate, SAN IP:127.0.0.1 and DNS:localhost
  std::string key_file;   // its key
};

// Creates `<dir>/<prefix>-ca.crt`, `<prefix>.crt` and `<prefix>.key` (EC P-256, one day).
// nullopt when openssl failed; `why` then says which step.
inline std::optional<TestCerts> MakeTestCerts(const std::string& dir, const std::string& prefix,
                                              std::string* why = nullptr) {
  const std::string p = dir + "/" + prefix;
  {
    std::ofstream ext(p + ".ext");
    ext << "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
           "keyUsage=critical,digitalSignature,keyEncipherment\n"
           "extendedKeyUsage=serverAuth\n";
  }
  const std::string quiet = " >/dev/null 2>&1";
  const std::string key = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  const std::string steps[] = {
      "openssl req -x509" + key + " -keyout '" + p + "-ca.key' -out '" + p +
          "-ca.crt' -days 1 -subj /CN=" + prefix + "-ca",
      "openssl req" + key + " -keyout '" + p + ".key' -out '" + p + ".csr' -subj /CN=127.0.0.1",
      "openssl x509 -req -in '" + p + ".csr' -CA '" + p + "-ca.crt' -CAkey '" + p +
          "-ca.key' -CAcreateserial -out '" + p + ".crt' -days 1 -extfile '" + p + ".ext'",
  };
  for (const std::string& step : steps) {
    if (std::system((step + quiet).c_str()) != 0) {
      if (why != nullptr) {
        *why = "failed: " + step;
      }
      return std::nullopt;
    }
  }
  return TestCerts{p + "-ca.crt", p + ".crt", p + ".key"};
}

}  // namespace sb::net::testing
