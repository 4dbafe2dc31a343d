// SPDX-License-Identifier: Apache-2.0
//
// fuzz/kube_codec_fuzz.cc
//
// The Kubernetes decoders (kube/codec.h) on each input: every object type, as one object, as a
// LIST page and as a watch event line; the JSON-pointer readers the owners' specs go through;
// and the encoders on what was decoded (names and annotations from the apiserver end up in
// request bodies). Seeds: testing/testdata/kube/ and fuzz/seeds/kube_codec/.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_input.h"
#include "kube/codec.h"

namespace {

using namespace sb::kube;

// The encoder of a type, where there is one.
void EncodeBack(const Pod& v) { (void)Encode(v); }
void EncodeBack(const Node& v) { (void)Encode(v); }
void EncodeBack(const Namespace& v) { (void)Encode(v); }
void EncodeBack(const Event& v) { (void)Encode(v); }
void EncodeBack(const Lease& v) { (void)Encode(v); }
void EncodeBack(const Job& v) { (void)Encode(v); }
void EncodeBack(const GenericObject& v) { (void)Encode(v); }

template <typename T>
void DecodeAll(std::string_view json) {
  if (auto one = Decode<T>(json)) {
    EncodeBack(*one);
  }
  if (auto list = DecodeList<T>(json)) {
    for (const T& item : list->items) {
      EncodeBack(item);
    }
  }
  (void)DecodeWatchEvent<T>(json);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view json = sb::fuzz::AsText(data, size);
  DecodeAll<Pod>(json);
  DecodeAll<Node>(json);
  DecodeAll<Namespace>(json);
  DecodeAll<Event>(json);
  DecodeAll<Lease>(json);
  DecodeAll<Job>(json);
  DecodeAll<GenericObject>(json);
  (void)Decode<Status>(json);
  for (std::string_view pointer : {"", "/spec/replicas", "/metadata/name", "/a~1b/0/~0c"}) {
    (void)JsonStringAt(json, pointer);
    (void)JsonIntAt(json, pointer);
    (void)JsonBoolAt(json, pointer);
    (void)JsonRawAt(json, pointer);
  }
  return 0;
}
