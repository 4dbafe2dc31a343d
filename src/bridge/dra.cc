// SPDX-License-Identifier: Apache-2.0
#include "bridge/dra.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <boost/json.hpp>

#include "bridge/gres.h"
#include "bridge/names.h"
#include "bridge/translate.h"
#include "kube/codec.h"
#include "kube/quantity.h"

namespace sb::bridge {
namespace json = boost::json;
namespace {

constexpr std::string_view kNvidiaDriver = "gpu.nvidia.com";
constexpr std::size_t kMaxSelectorBytes = 10 * 1024;  // resourcev1.CELSelectorExpressionMaxLength
constexpr std::size_t kMaxDriverLength = 63;          // resourcev1.DriverNameMaxLength
// A gresName is also a claim request name (a DNS label), with room for a "-NN" suffix.
constexpr std::size_t kMaxGresNameLength = 60;

Error Invalid(std::string message) {
  return Error{ErrorCode::kInvalidArgument, std::move(message)};
}

std::string Quote(std::string_view s) { return fmt::format("\"{}\"", s); }

// ---- JSON reading (Boost.JSON, never throwing) ----

const json::value* At(const json::value* v, std::initializer_list<std::string_view> path) {
  for (std::string_view k : path) {
    if (v == nullptr || !v->is_object()) return nullptr;
    v = v->as_object().if_contains(k);
  }
  return v;
}

std::string StrAt(const json::value* v, std::initializer_list<std::string_view> path) {
  const json::value* x = At(v, path);
  return x != nullptr && x->is_string() ? std::string(x->get_string()) : std::string();
}

std::optional<std::int64_t> IntOf(const json::value* x) {
  if (x == nullptr) return std::nullopt;
  if (x->is_int64()) return x->get_int64();
  if (x->is_uint64() && x->get_uint64() <= static_cast<std::uint64_t>(INT64_MAX)) {
    return static_cast<std::int64_t>(x->get_uint64());
  }
  return std::nullopt;
}

bool BoolAt(const json::value* v, std::initializer_list<std::string_view> path) {
  const json::value* x = At(v, path);
  return x != nullptr && x->is_bool() && x->get_bool();
}

const json::array* ArrayAt(const json::value* v, std::initializer_list<std::string_view> path) {
  const json::value* x = At(v, path);
  return x != nullptr && x->is_array() ? &x->get_array() : nullptr;
}

// "" parses as an empty object (an absent spec).
Result<json::value> ParseJson(std::string_view text, std::string_view what) {
  if (text.empty()) return json::value(json::object());
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec) return tl::unexpected(Invalid(fmt::format("{} is not JSON: {}", what, ec.message())));
  return v;
}

std::string ObjectName(const kube::GenericObject& o) {
  return o.metadata.namespace_.empty() ? o.metadata.name
                                       : o.metadata.namespace_ + "/" + o.metadata.name;
}

// ---- Small text helpers ----

bool IsDigits(std::string_view s) {
  return !s.empty() && std::ranges::all_of(s, [](char c) { return c >= '0' && c <= '9'; });
}

std::optional<std::int64_t> ToInt(std::string_view s) {
  std::int64_t v = 0;
  if (s.empty()) return std::nullopt;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

bool IsDnsLabel(std::string_view s, std::size_t max) {
  if (s.empty() || s.size() > max) return false;
  auto ok = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; };
  return std::ranges::all_of(s, ok) && s.front() != '-' && s.back() != '-';
}

bool IsDnsSubdomain(std::string_view s, std::size_t max) {
  if (s.empty() || s.size() > max) return false;
  std::size_t start = 0;
  while (start <= s.size()) {
    std::size_t dot = s.find('.', start);
    if (dot == std::string_view::npos) dot = s.size();
    if (!IsDnsLabel(s.substr(start, dot - start), 63)) return false;
    start = dot + 1;
  }
  return true;
}

bool IsProfileName(std::string_view s) {
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  if (s.empty() || !alnum(s.front()) || !alnum(s.back())) return false;
  return std::ranges::all_of(s,
                             [&](char c) { return alnum(c) || c == '.' || c == '_' || c == '-'; });
}

bool IsIdentifier(std::string_view s) {
  if (s.empty() || s.size() > 32 || std::isalpha(static_cast<unsigned char>(s.front())) == 0) {
    return false;
  }
  return std::ranges::all_of(
      s, [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; });
}

// {0,1,2,3,5} -> "0-3,5".
std::string FormatIndices(std::vector<std::int64_t> v) {
  std::ranges::sort(v);
  std::string out;
  for (std::size_t i = 0; i < v.size();) {
    std::size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? std::to_string(v[i]) : fmt::format("{}-{}", v[i], v[j]);
    i = j + 1;
  }
  return out.empty() ? "none" : out;
}

// ---- The selector subset ----

class SelectorParser {
 public:
  explicit SelectorParser(std::string_view text) : s_(text) {}

  Result<std::vector<SelectorTerm>> Parse() {
    std::vector<SelectorTerm> terms;
    if (Result<void> r = Conjunction(terms, 0); !r) return tl::unexpected(r.error());
    Skip();
    if (pos_ != s_.size()) return Fail("unexpected text");
    if (terms.empty()) return Fail("no comparison");
    return terms;
  }

 private:
  tl::unexpected<Error> Fail(std::string_view what) const {
    return tl::unexpected(Invalid(fmt::format(
        "selector {}: {} at offset {}; the bridge understands comparisons (== or !=) of "
        "device.driver or device.attributes['<domain>'].<name> with a string, integer or boolean, "
        "joined by && (it has no CEL interpreter)",
        Quote(s_), what, pos_)));
  }
  void Skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_])) != 0) ++pos_;
  }
  bool Eat(std::string_view token) {
    Skip();
    if (s_.substr(pos_).starts_with(token)) {
      pos_ += token.size();
      return true;
    }
    return false;
  }
  std::string_view Ident() {
    Skip();
    std::size_t start = pos_;
    while (pos_ < s_.size() &&
           (std::isalnum(static_cast<unsigned char>(s_[pos_])) != 0 || s_[pos_] == '_')) {
      ++pos_;
    }
    return s_.substr(start, pos_ - start);
  }
  std::optional<std::string> String() {
    Skip();
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) return std::nullopt;
    const char q = s_[pos_++];
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != q) {
      if (s_[pos_] == '\\') {
        if (++pos_ >= s_.size()) return std::nullopt;
        const char c = s_[pos_];
        if (c != '\\' && c != '\'' && c != '"') return std::nullopt;  // other escapes: not ours
      }
      out += s_[pos_++];
    }
    if (pos_ >= s_.size()) return std::nullopt;
    ++pos_;
    return out;
  }

  Result<void> Conjunction(std::vector<SelectorTerm>& terms, int depth) {
    if (depth > 16) return Fail("too deeply nested");
    do {
      if (Eat("(")) {
        if (Result<void> r = Conjunction(terms, depth + 1); !r) return r;
        if (!Eat(")")) return Fail("missing )");
      } else if (Result<void> r = Comparison(terms); !r) {
        return r;
      }
    } while (Eat("&&"));
    return {};
  }

  // An operand is device.driver or device.attributes[...]; a literal the other side.
  Result<void> Comparison(std::vector<SelectorTerm>& terms) {
    SelectorTerm t;
    Skip();
    const bool operand_first = s_.substr(pos_).starts_with("device");
    if (operand_first) {
      if (Result<void> r = Operand(t); !r) return r;
      if (Result<void> r = Operator(t); !r) return r;
      if (Result<void> r = Literal(t); !r) return r;
    } else {
      if (Result<void> r = Literal(t); !r) return r;
      if (Result<void> r = Operator(t); !r) return r;
      if (Result<void> r = Operand(t); !r) return r;
    }
    if (t.kind == SelectorTerm::Kind::kDriver && t.type != SelectorTerm::Type::kString) {
      return Fail("device.driver is compared with a non-string");
    }
    terms.push_back(std::move(t));
    return {};
  }
  Result<void> Operand(SelectorTerm& t) {
    if (Ident() != "device" || !Eat(".")) {
      return Fail("expected device.driver or device.attributes");
    }
    const std::string_view field = Ident();
    if (field == "driver") {
      t.kind = SelectorTerm::Kind::kDriver;
      return {};
    }
    if (field != "attributes" || !Eat("[")) {
      return Fail("expected device.driver or device.attributes");
    }
    std::optional<std::string> domain = String();
    if (!domain || !Eat("]")) return Fail("expected device.attributes['<domain>']");
    std::string name;
    if (Eat(".")) {
      name = std::string(Ident());
    } else if (Eat("[")) {
      std::optional<std::string> n = String();
      if (!n || !Eat("]")) return Fail("expected ['<name>']");
      name = *n;
    }
    if (!IsIdentifier(name) || domain->empty()) return Fail("expected an attribute name");
    t.kind = SelectorTerm::Kind::kAttribute;
    t.attribute = *domain + "/" + name;
    return {};
  }
  Result<void> Operator(SelectorTerm& t) {
    if (Eat("==")) return {};
    if (Eat("!=")) {
      t.negated = true;
      return {};
    }
    return Fail("expected == or !=");
  }
  Result<void> Literal(SelectorTerm& t) {
    Skip();
    if (std::optional<std::string> s = String()) {
      t.type = SelectorTerm::Type::kString;
      t.string_value = std::move(*s);
      return {};
    }
    if (pos_ < s_.size() && (s_[pos_] == '\'' || s_[pos_] == '"')) return Fail("bad string");
    std::size_t start = pos_;
    if (pos_ < s_.size() && s_[pos_] == '-') ++pos_;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
    if (pos_ > start && s_[pos_ - 1] != '-') {
      std::optional<std::int64_t> v = ToInt(s_.substr(start, pos_ - start));
      if (!v) return Fail("integer out of range");
      t.type = SelectorTerm::Type::kInt;
      t.int_value = *v;
      return {};
    }
    pos_ = start;
    const std::string_view word = Ident();
    if (word == "true" || word == "false") {
      t.type = SelectorTerm::Type::kBool;
      t.bool_value = word == "true";
      return {};
    }
    pos_ = start;
    return Fail("expected a string, integer or boolean literal");
  }

  std::string_view s_;
  std::size_t pos_ = 0;
};

bool TermMatches(const SelectorTerm& t, std::string_view driver, const SliceDevice& device) {
  bool equal = false;
  if (t.kind == SelectorTerm::Kind::kDriver) {
    equal = driver == t.string_value;
  } else {
    auto it = device.attributes.find(t.attribute);
    if (it == device.attributes.end()) return false;  // CEL: an error; here: no match
    const DeviceAttribute& a = it->second;
    switch (t.type) {
      case SelectorTerm::Type::kString:
        if (a.type != DeviceAttribute::Type::kString) return false;
        equal = a.string_value == t.string_value;
        break;
      case SelectorTerm::Type::kInt:
        if (a.type != DeviceAttribute::Type::kInt) return false;
        equal = a.int_value == t.int_value;
        break;
      case SelectorTerm::Type::kBool:
        if (a.type != DeviceAttribute::Type::kBool) return false;
        equal = a.bool_value == t.bool_value;
        break;
    }
  }
  return t.negated ? !equal : equal;
}

// ---- Where a device's Slurm index comes from ----

struct IndexSource {
  bool from_name = false;
  std::string attribute;  // qualified
};

IndexSource IndexSourceOf(const DeviceProfile& p) {
  std::string_view from = p.index_from;
  if (from.empty()) from = p.driver == kNvidiaDriver ? "name" : "attribute:index";
  if (from == "name") return {.from_name = true};
  std::string attr(from.substr(std::string_view("attribute:").size()));
  if (attr.find('/') == std::string::npos) attr = p.driver + "/" + attr;
  return {.attribute = attr};
}

std::string CpuAttribute(const DeviceProfile& p, std::string_view name) {
  return p.driver + "/" + std::string(name);
}

std::optional<std::int64_t> IntAttribute(const SliceDevice& d, const std::string& key) {
  auto it = d.attributes.find(key);
  if (it == d.attributes.end() || it->second.type != DeviceAttribute::Type::kInt) {
    return std::nullopt;
  }
  return it->second.int_value;
}

std::string DeviceId(const InventoryDevice& d) {
  return fmt::format("{}/{}/{}", d.driver, d.pool, d.device);
}

std::vector<std::string> CoveredClasses(const std::vector<DeviceProfile>& profiles) {
  std::set<std::string> drivers;
  for (const DeviceProfile& p : profiles) drivers.insert(p.driver);
  return {drivers.begin(), drivers.end()};
}

std::string NotCoveredSuffix(const std::vector<DeviceProfile>& profiles) {
  if (profiles.empty()) {
    return "DRA is off: config deviceProfiles is empty";
  }
  return fmt::format("covered: {}", fmt::join(CoveredClasses(profiles), ", "));
}

}  // namespace

// ---- Device profiles ----

Result<std::vector<SelectorTerm>> ParseDeviceSelector(std::string_view cel) {
  return SelectorParser(cel).Parse();
}

Result<void> ValidateDeviceProfiles(const std::vector<DeviceProfile>& profiles) {
  std::map<std::string, std::string> names_by_selector;
  std::set<std::string> names;
  std::string core_bitmap;
  for (std::size_t i = 0; i < profiles.size(); ++i) {
    const DeviceProfile& p = profiles[i];
    auto fail = [&](const std::string& what) {
      return tl::unexpected(Invalid(fmt::format(
          "profile {}: {}", p.name.empty() ? fmt::format("#{}", i) : Quote(p.name), what)));
    };
    if (p.name.empty()) return fail("has no name");
    if (!IsProfileName(p.name)) {
      return fail(
          "the name must start and end with a letter or digit and hold only letters, "
          "digits, '.', '_' and '-'");
    }
    if (!names.insert(p.name).second) return fail("the name is used twice");
    if (p.driver.empty()) return fail("has no driver");
    if (!IsDnsSubdomain(p.driver, kMaxDriverLength)) {
      return fail(fmt::format("driver {} is not a DNS subdomain of at most {} characters",
                              Quote(p.driver), kMaxDriverLength));
    }
    if (p.selector.empty()) return fail("has no selector");
    if (p.selector.size() > kMaxSelectorBytes) {
      return fail(fmt::format("the selector is longer than {} bytes", kMaxSelectorBytes));
    }
    Result<std::vector<SelectorTerm>> terms = ParseDeviceSelector(p.selector);
    if (!terms) return fail(terms.error().message);
    for (const SelectorTerm& t : *terms) {
      if (t.kind == SelectorTerm::Kind::kDriver && !t.negated && t.string_value != p.driver) {
        return fail(fmt::format("the selector asks for device.driver {} but the driver is {}",
                                Quote(t.string_value), Quote(p.driver)));
      }
    }
    if (auto [it, fresh] = names_by_selector.emplace(p.selector, p.name); !fresh) {
      return fail(fmt::format("has the selector of profile {}", Quote(it->second)));
    }
    if (p.backend == DeviceBackend::kCoreBitmap) {
      if (!core_bitmap.empty()) {
        return fail(fmt::format("profile {} uses the core-bitmap backend already; one may",
                                Quote(core_bitmap)));
      }
      core_bitmap = p.name;
      if (!p.gres_name.empty() || !p.gres_type.empty() || !p.index_from.empty()) {
        return fail("gresName, gresType and indexFrom are for the indexed-gres backend");
      }
      continue;
    }
    if (p.gres_name.empty()) return fail("the indexed-gres backend needs a gresName");
    if (!IsDnsLabel(p.gres_name, kMaxGresNameLength)) {
      return fail(fmt::format(
          "gresName {} must be a DNS label of at most {} characters (lower-case letters, digits, "
          "'-'): it also names the claim's request",
          Quote(p.gres_name), kMaxGresNameLength));
    }
    if (!p.gres_type.empty() && !std::ranges::all_of(p.gres_type, [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' ||
                 c == '.';
        })) {
      return fail(fmt::format("gresType {} is not a Slurm GRES type", Quote(p.gres_type)));
    }
    if (!p.index_from.empty() && p.index_from != "name") {
      std::string_view attr = p.index_from;
      const bool prefixed = attr.starts_with("attribute:");
      if (prefixed) attr.remove_prefix(std::string_view("attribute:").size());
      const std::size_t slash = attr.rfind('/');
      const std::string_view id = slash == std::string_view::npos ? attr : attr.substr(slash + 1);
      if (!prefixed || !IsIdentifier(id) ||
          (slash != std::string_view::npos && !IsDnsSubdomain(attr.substr(0, slash), 63))) {
        return fail(fmt::format(
            "indexFrom {} is not \"name\" or \"attribute:<name>\" (an int attribute such as "
            "index or gpu.example.com/index)",
            Quote(p.index_from)));
      }
    }
  }
  return {};
}

const DeviceProfile* FindProfile(const std::vector<DeviceProfile>& profiles,
                                 std::string_view name) {
  auto it = std::ranges::find(profiles, name, &DeviceProfile::name);
  return it == profiles.end() ? nullptr : &*it;
}

Result<const DeviceProfile*> ProfileForClass(std::string_view class_name,
                                             const kube::GenericObject* device_class,
                                             const std::vector<DeviceProfile>& profiles) {
  if (device_class == nullptr) {
    std::vector<const DeviceProfile*> found;
    for (const DeviceProfile& p : profiles) {
      if (p.driver == class_name) found.push_back(&p);
    }
    if (found.size() == 1) return found.front();
    if (found.empty()) {
      return tl::unexpected(
          Invalid(fmt::format("device class {} is covered by no device profile ({})",
                              Quote(class_name), NotCoveredSuffix(profiles))));
    }
    std::vector<std::string> names;
    for (const DeviceProfile* p : found) names.push_back(p->name);
    return tl::unexpected(Invalid(fmt::format(
        "device class {} is the driver of several device profiles ({}): its DeviceClass is "
        "needed to tell them apart",
        Quote(class_name), fmt::join(names, ", "))));
  }
  Result<json::value> spec =
      ParseJson(device_class->spec_json, fmt::format("DeviceClass {} spec", Quote(class_name)));
  if (!spec) return tl::unexpected(spec.error());
  const json::array* config = ArrayAt(&*spec, {"config"});
  if (config != nullptr && !config->empty()) {
    return tl::unexpected(Invalid(fmt::format(
        "DeviceClass {} has spec.config, which the bridge does not pass on", Quote(class_name))));
  }
  const json::array* selectors = ArrayAt(&*spec, {"selectors"});
  std::string expression;
  if (selectors != nullptr && selectors->size() == 1) {
    expression = StrAt(&(*selectors)[0], {"cel", "expression"});
  }
  if (expression.empty()) {
    return tl::unexpected(Invalid(
        fmt::format("DeviceClass {} must have exactly one CEL selector to match a device profile",
                    Quote(class_name))));
  }
  for (const DeviceProfile& p : profiles) {
    // Byte for byte, as upstream's registry: a selector that merely means the same is another.
    if (p.selector == expression) return &p;
  }
  return tl::unexpected(
      Invalid(fmt::format("DeviceClass {}: its selector {} is no device profile's selector ({})",
                          Quote(class_name), Quote(expression), NotCoveredSuffix(profiles))));
}

std::string DraTres(const DeviceProfile& profile) {
  if (profile.backend == DeviceBackend::kCoreBitmap) return "";
  return profile.gres_type.empty()
             ? "gres/" + profile.gres_name
             : fmt::format("gres/{}:{}", profile.gres_name, profile.gres_type);
}

// ---- ResourceSlices ----

Result<ResourceSliceInfo> ParseResourceSlice(const kube::GenericObject& slice) {
  const std::string what = fmt::format("ResourceSlice {}", Quote(slice.metadata.name));
  Result<json::value> spec = ParseJson(slice.spec_json, what + " spec");
  if (!spec) return tl::unexpected(spec.error());
  ResourceSliceInfo out;
  out.name = slice.metadata.name;
  const json::value* s = &*spec;
  out.driver = StrAt(s, {"driver"});
  out.pool = StrAt(s, {"pool", "name"});
  out.node_name = StrAt(s, {"nodeName"});
  out.per_device_node_selection = BoolAt(s, {"perDeviceNodeSelection"});
  if (out.driver.empty()) return tl::unexpected(Invalid(what + ": spec.driver is missing"));
  if (out.pool.empty()) return tl::unexpected(Invalid(what + ": spec.pool.name is missing"));
  std::optional<std::int64_t> gen = IntOf(At(s, {"pool", "generation"}));
  std::optional<std::int64_t> count = IntOf(At(s, {"pool", "resourceSliceCount"}));
  if (!count || *count <= 0) {
    return tl::unexpected(Invalid(what + ": spec.pool.resourceSliceCount must be above 0"));
  }
  out.generation = gen.value_or(0);
  out.resource_slice_count = *count;
  if (const json::array* devices = ArrayAt(s, {"devices"}); devices != nullptr) {
    for (std::size_t i = 0; i < devices->size(); ++i) {
      const json::value* d = &(*devices)[i];
      SliceDevice dev;
      dev.name = StrAt(d, {"name"});
      if (dev.name.empty()) {
        return tl::unexpected(Invalid(fmt::format("{}: spec.devices[{}] has no name", what, i)));
      }
      dev.node_name = StrAt(d, {"nodeName"});
      if (const json::value* attrs = At(d, {"attributes"});
          attrs != nullptr && attrs->is_object()) {
        for (const auto& [key, value] : attrs->get_object()) {
          std::string qualified(key);
          if (qualified.find('/') == std::string::npos) qualified = out.driver + "/" + qualified;
          DeviceAttribute a;
          if (const json::value* v = At(&value, {"int"}); v != nullptr) {
            std::optional<std::int64_t> n = IntOf(v);
            if (!n) continue;
            a.type = DeviceAttribute::Type::kInt;
            a.int_value = *n;
          } else if (const json::value* b = At(&value, {"bool"}); b != nullptr && b->is_bool()) {
            a.type = DeviceAttribute::Type::kBool;
            a.bool_value = b->get_bool();
          } else if (const json::value* t = At(&value, {"string"});
                     t != nullptr && t->is_string()) {
            a.type = DeviceAttribute::Type::kString;
            a.string_value = std::string(t->get_string());
          } else if (At(&value, {"version"}) != nullptr) {
            a.type = DeviceAttribute::Type::kVersion;
            a.string_value = StrAt(&value, {"version"});
          } else {
            continue;  // a list ("strings") or a type of a later API: not compared here
          }
          dev.attributes[qualified] = std::move(a);
        }
      }
      out.devices.push_back(std::move(dev));
    }
  }
  return out;
}

Result<ResourceSliceInfo> ParseResourceSliceJson(std::string_view text) {
  Result<kube::GenericObject> o = kube::Decode<kube::GenericObject>(text);
  if (!o) {
    return tl::unexpected(
        Invalid(fmt::format("ResourceSlice is not a Kubernetes object: {}", o.error().message)));
  }
  if (!o->kind.empty() && o->kind != "ResourceSlice") {
    return tl::unexpected(
        Invalid(fmt::format("{} {} is not a ResourceSlice", o->kind, Quote(o->metadata.name))));
  }
  return ParseResourceSlice(*o);
}

bool ProfileMatches(const DeviceProfile& profile, std::string_view driver,
                    const SliceDevice& device) {
  if (driver != profile.driver) return false;
  Result<std::vector<SelectorTerm>> terms = ParseDeviceSelector(profile.selector);
  if (!terms) return false;
  return std::ranges::all_of(*terms,
                             [&](const SelectorTerm& t) { return TermMatches(t, driver, device); });
}

// ---- Inventory ----

const InventoryDevice* NodeInventory::ByIndex(std::string_view profile, std::int64_t index) const {
  auto it = devices.find(std::string(profile));
  if (it == devices.end()) return nullptr;
  auto d = std::ranges::find(it->second, index, &InventoryDevice::index);
  return d == it->second.end() ? nullptr : &*d;
}

const InventoryDevice* NodeInventory::ByCpu(std::string_view profile, std::int64_t cpu_id) const {
  auto it = devices.find(std::string(profile));
  if (it == devices.end()) return nullptr;
  auto d = std::ranges::find(it->second, cpu_id, &InventoryDevice::cpu_id);
  return d == it->second.end() ? nullptr : &*d;
}

std::int64_t NodeInventory::CoreCount(std::string_view profile) const {
  auto it = devices.find(std::string(profile));
  if (it == devices.end() || it->second.empty()) return 0;
  std::int64_t top = -1;
  for (const InventoryDevice& d : it->second) top = std::max(top, d.core);
  return top + 1;
}

Result<NodeInventory> BuildNodeInventory(std::string_view node,
                                         const std::vector<ResourceSliceInfo>& slices,
                                         const std::vector<DeviceProfile>& profiles) {
  NodeInventory inv;
  inv.node = std::string(node);
  std::set<std::string> drivers;
  for (const DeviceProfile& p : profiles) drivers.insert(p.driver);

  // Per pool: the slices of its highest generation.
  struct Pool {
    std::int64_t generation = 0;
    std::vector<const ResourceSliceInfo*> slices;
  };
  std::map<std::pair<std::string, std::string>, Pool> pools;
  for (const ResourceSliceInfo& s : slices) {
    if (!drivers.contains(s.driver)) continue;
    auto [it, fresh] = pools.try_emplace({s.driver, s.pool});
    Pool& pool = it->second;
    if (fresh || s.generation > pool.generation) {
      pool.generation = s.generation;
      pool.slices = {&s};
    } else if (s.generation == pool.generation) {
      pool.slices.push_back(&s);
    }
  }

  auto on_node = [&](const ResourceSliceInfo& s, const SliceDevice& d) {
    return s.per_device_node_selection ? d.node_name == node : s.node_name == node;
  };
  std::set<std::string> seen;
  // Slurm's index space is per GRES name: two devices of one name on one index are one too many.
  std::map<std::pair<std::string, std::int64_t>, std::string> gres_index_owner;
  // Core-bitmap devices, per profile, before Slurm's core numbers are known.
  struct Cpu {
    InventoryDevice device;
    std::int64_t socket = 0;
    std::optional<std::int64_t> core;  // coreID; absent: the CPU is a core of its own
  };
  std::map<std::string, std::vector<Cpu>> cpus;
  for (const auto& [key, pool] : pools) {
    const bool relevant = std::ranges::any_of(pool.slices, [&](const ResourceSliceInfo* s) {
      return std::ranges::any_of(s->devices, [&](const SliceDevice& d) { return on_node(*s, d); });
    });
    if (!relevant) continue;
    const std::int64_t want = pool.slices.front()->resource_slice_count;
    const bool consistent = std::ranges::all_of(
        pool.slices, [&](const ResourceSliceInfo* s) { return s->resource_slice_count == want; });
    if (!consistent || static_cast<std::int64_t>(pool.slices.size()) != want) {
      inv.skipped_pools.push_back(
          consistent ? fmt::format("{}/{}: generation {} has {} of {} ResourceSlices", key.first,
                                   key.second, pool.generation, pool.slices.size(), want)
                     : fmt::format("{}/{}: generation {} has slices that disagree on "
                                   "resourceSliceCount",
                                   key.first, key.second, pool.generation));
      continue;
    }
    for (const ResourceSliceInfo* s : pool.slices) {
      for (const SliceDevice& d : s->devices) {
        if (!on_node(*s, d)) continue;
        InventoryDevice dev{.driver = s->driver, .pool = s->pool, .device = d.name};
        const std::string id = DeviceId(dev);
        const DeviceProfile* match = nullptr;
        for (const DeviceProfile& p : profiles) {
          if (!ProfileMatches(p, s->driver, d)) continue;
          if (match != nullptr) {
            return tl::unexpected(Invalid(fmt::format(
                "ResourceSlice device {} matches device profiles {} and {}: a device must belong "
                "to one profile, or Slurm would count it twice",
                id, Quote(match->name), Quote(p.name))));
          }
          match = &p;
        }
        if (match == nullptr) continue;
        if (!seen.insert(id).second) {
          return tl::unexpected(
              Invalid(fmt::format("ResourceSlice device {} is published twice", id)));
        }
        dev.profile = match->name;
        if (match->backend == DeviceBackend::kCoreBitmap) {
          dev.index_attribute = CpuAttribute(*match, "cpuID");
          std::optional<std::int64_t> cpu = IntAttribute(d, dev.index_attribute);
          if (!cpu || *cpu < 0) {
            return tl::unexpected(Invalid(fmt::format(
                "ResourceSlice device {} (profile {}) has no int attribute {}: the core-bitmap "
                "backend needs one device per CPU (dra.cpu's individual mode; its grouped mode "
                "is not supported)",
                id, Quote(match->name), dev.index_attribute)));
          }
          auto type = d.attributes.find(CpuAttribute(*match, "coreType"));
          if (type != d.attributes.end() && type->second.string_value == "e-core") {
            continue;  // Slurm does not count efficiency cores by default (as upstream)
          }
          dev.cpu_id = *cpu;
          cpus[match->name].push_back(
              {.device = std::move(dev),
               .socket = IntAttribute(d, CpuAttribute(*match, "socketID")).value_or(0),
               .core = IntAttribute(d, CpuAttribute(*match, "coreID"))});
          continue;
        }
        const IndexSource src = IndexSourceOf(*match);
        std::optional<std::int64_t> index;
        if (src.from_name) {
          const std::size_t dash = d.name.rfind('-');
          if (dash != std::string::npos && IsDigits(std::string_view(d.name).substr(dash + 1))) {
            index = ToInt(std::string_view(d.name).substr(dash + 1));
          }
        } else {
          index = IntAttribute(d, src.attribute);
          dev.index_attribute = src.attribute;
        }
        if (!index || *index < 0) {
          return tl::unexpected(Invalid(fmt::format(
              "ResourceSlice device {} (profile {}) has no Slurm GRES index: {}", id,
              Quote(match->name),
              src.from_name ? "its name does not end in -<index> (indexFrom name)"
                            : fmt::format("no non-negative int attribute {}", src.attribute))));
        }
        dev.index = *index;
        auto [owner, fresh] = gres_index_owner.try_emplace({match->gres_name, *index}, id);
        if (!fresh) {
          return tl::unexpected(Invalid(
              fmt::format("ResourceSlice devices {} and {} both have Slurm {} index {} on node {}",
                          owner->second, id, match->gres_name, *index, node)));
        }
        inv.devices[match->name].push_back(std::move(dev));
      }
    }
  }
  for (auto& [name, list] : inv.devices) std::ranges::sort(list, {}, &InventoryDevice::index);

  // Slurm's abstract cores: the distinct (socket, core) pairs in order, each standing for its
  // CPUs (hyperthreads), as Slurm numbers the bits of a core bitmap.
  for (auto& [name, list] : cpus) {
    auto core_key = [](const Cpu& c) {
      return std::pair{c.socket, c.core.value_or(c.device.cpu_id)};
    };
    std::ranges::sort(list, [&](const Cpu& a, const Cpu& b) {
      return std::pair{core_key(a), a.device.cpu_id} < std::pair{core_key(b), b.device.cpu_id};
    });
    std::set<std::int64_t> cpu_ids;
    std::vector<InventoryDevice>& devices = inv.devices[name];
    for (std::size_t i = 0; i < list.size(); ++i) {
      Cpu& c = list[i];
      if (!cpu_ids.insert(c.device.cpu_id).second) {
        return tl::unexpected(
            Invalid(fmt::format("ResourceSlice devices of profile {} on node {} repeat CPU {}",
                                Quote(name), node, c.device.cpu_id)));
      }
      const bool new_core = i == 0 || core_key(list[i - 1]) != core_key(c) || !c.core;
      c.device.core = devices.empty() ? 0 : devices.back().core + (new_core ? 1 : 0);
      devices.push_back(std::move(c.device));
    }
  }
  return inv;
}

// ---- Agreement with Slurm's GRES ----

Result<std::vector<NodeGres>> ParseNodeGres(std::string_view gres) {
  std::vector<NodeGres> out;
  std::map<std::string, std::int64_t> next_index;
  if (gres.empty() || gres == "(null)") return out;
  for (std::string_view entry : SplitTopLevel(gres)) {
    const auto bad = [&](std::string_view why) {
      return tl::unexpected(
          Invalid(fmt::format("Slurm GRES {} in {}: {}", Quote(entry), Quote(gres), why)));
    };
    std::string_view head = entry;
    std::string_view extra;
    if (const std::size_t paren = entry.find('('); paren != std::string_view::npos) {
      if (!entry.ends_with(')')) return bad("unbalanced parenthesis");
      head = entry.substr(0, paren);
      extra = entry.substr(paren + 1, entry.size() - paren - 2);
    }
    std::vector<std::string_view> parts;
    for (std::size_t start = 0;;) {
      const std::size_t colon = head.find(':', start);
      parts.push_back(head.substr(
          start, colon == std::string_view::npos ? std::string_view::npos : colon - start));
      if (colon == std::string_view::npos) break;
      start = colon + 1;
    }
    if (parts.size() > 3 || parts[0].empty()) return bad("not name[:type][:count]");
    NodeGres g{.name = std::string(parts[0])};
    auto count_of = [](std::string_view c) -> std::optional<std::int64_t> {
      std::int64_t scale = 1;
      if (!c.empty() && (c.back() == 'K' || c.back() == 'M' || c.back() == 'G')) {
        scale = c.back() == 'K' ? 1024 : c.back() == 'M' ? 1024 * 1024 : 1024 * 1024 * 1024;
        c.remove_suffix(1);
      }
      if (!IsDigits(c)) return std::nullopt;
      std::optional<std::int64_t> n = ToInt(c);
      if (!n || *n > INT64_MAX / scale) return std::nullopt;
      return *n * scale;
    };
    g.count = 1;
    if (parts.size() == 3) {
      g.type = std::string(parts[1]);
      std::optional<std::int64_t> n = count_of(parts[2]);
      if (!n) return bad("the count is not a number");
      g.count = *n;
    } else if (parts.size() == 2) {
      if (std::optional<std::int64_t> n = count_of(parts[1])) {
        g.count = *n;
      } else {
        g.type = std::string(parts[1]);
      }
    }
    if (const std::size_t idx = extra.find("IDX:"); idx != std::string_view::npos) {
      std::string_view list = extra.substr(idx + 4);
      if (list != "N/A") {
        Result<std::vector<std::int64_t>> v = ExpandIndexList(list);
        if (!v) return bad(v.error().message);
        g.indices = std::move(*v);
      }
    } else if (g.count <= 4096) {
      std::int64_t& next = next_index[g.name];
      for (std::int64_t i = 0; i < g.count; ++i) g.indices.push_back(next++);
    }
    out.push_back(std::move(g));
  }
  return out;
}

GresAgreement CheckGresAgreement(const NodeInventory& inventory, const slurm::NodeInfo& slurm_node,
                                 const std::vector<DeviceProfile>& profiles) {
  GresAgreement out;
  std::vector<std::string> clauses;
  Result<std::vector<NodeGres>> gres = ParseNodeGres(slurm_node.gres);
  if (!gres) {
    out.agrees = false;
    out.reason = gres.error().message;
    return out;
  }
  // Groups: per GRES name, one per gresType of its profiles, and one of its untyped profiles.
  struct Group {
    std::vector<const DeviceProfile*> members;
  };
  std::map<std::pair<std::string, std::string>, Group> groups;
  for (const DeviceProfile& p : profiles) {
    if (p.backend == DeviceBackend::kIndexedGres) {
      groups[{p.gres_name, p.gres_type}].members.push_back(&p);
    }
  }
  for (const auto& [key, group] : groups) {
    const auto& [name, type] = key;
    std::vector<std::int64_t> slurm;
    for (const NodeGres& g : *gres) {
      if (g.name != name) continue;
      const bool typed_elsewhere =
          type.empty() && !g.type.empty() && groups.contains({name, g.type});
      if ((type.empty() && !typed_elsewhere) || (!type.empty() && g.type == type)) {
        slurm.insert(slurm.end(), g.indices.begin(), g.indices.end());
      }
    }
    std::vector<std::int64_t> ours;
    std::vector<std::string> member_names;
    for (const DeviceProfile* p : group.members) {
      member_names.push_back(p->name);
      if (auto it = inventory.devices.find(p->name); it != inventory.devices.end()) {
        for (const InventoryDevice& d : it->second) ours.push_back(d.index);
      }
    }
    std::ranges::sort(slurm);
    std::ranges::sort(ours);
    const std::string label = type.empty() ? name : name + ":" + type;
    const std::string who = fmt::format("{}", fmt::join(member_names, ", "));
    if (ours.empty() && slurm.empty()) continue;
    if (ours.empty()) {
      clauses.push_back(
          fmt::format("{}: Slurm has indices {}, no ResourceSlice device of {} (no "
                      "DRA driver for them here)",
                      label, FormatIndices(slurm), who));
      continue;
    }
    if (ours != slurm) {
      out.agrees = false;
      clauses.push_back(fmt::format("{}: Slurm has indices {}, the ResourceSlices of {} {}", label,
                                    FormatIndices(slurm), who, FormatIndices(ours)));
      continue;
    }
    clauses.push_back(fmt::format("{}: indices {} as Slurm", label, FormatIndices(slurm)));
    for (const DeviceProfile* p : group.members) {
      if (inventory.devices.contains(p->name)) out.usable_profiles.insert(p->name);
    }
  }
  for (const DeviceProfile& p : profiles) {
    if (p.backend != DeviceBackend::kCoreBitmap) continue;
    auto it = inventory.devices.find(p.name);
    const std::int64_t n =
        it == inventory.devices.end() ? 0 : static_cast<std::int64_t>(it->second.size());
    if (n == 0) {
      clauses.push_back(fmt::format("{}: no ResourceSlice CPU device", p.name));
    } else if (slurm_node.cpus > 0 && n != slurm_node.cpus) {
      out.agrees = false;
      clauses.push_back(
          fmt::format("{}: Slurm has {} CPUs, the ResourceSlices {}", p.name, slurm_node.cpus, n));
    } else {
      clauses.push_back(fmt::format("{}: {} CPUs as Slurm", p.name, n));
      out.usable_profiles.insert(p.name);
    }
  }
  if (!inventory.skipped_pools.empty()) {
    clauses.push_back(fmt::format("left out: {}", fmt::join(inventory.skipped_pools, "; ")));
  }
  out.reason = clauses.empty() ? "no device of the device profiles on either side"
                               : fmt::format("{}", fmt::join(clauses, "; "));
  return out;
}

// ---- Pod requests ----

Result<std::vector<PodResourceClaim>> PodResourceClaimsOf(std::string_view pod_json) {
  Result<json::value> v = ParseJson(pod_json, "pod");
  if (!v) return tl::unexpected(v.error());
  if (!v->is_object()) return tl::unexpected(Invalid("pod is not a JSON object"));
  std::vector<PodResourceClaim> out;
  if (const json::array* claims = ArrayAt(&*v, {"spec", "resourceClaims"}); claims != nullptr) {
    for (const json::value& c : *claims) {
      out.push_back({.name = StrAt(&c, {"name"}),
                     .resource_claim_name = StrAt(&c, {"resourceClaimName"}),
                     .resource_claim_template_name = StrAt(&c, {"resourceClaimTemplateName"})});
    }
  }
  if (const json::array* st = ArrayAt(&*v, {"status", "resourceClaimStatuses"}); st != nullptr) {
    for (const json::value& s : *st) {
      const std::string name = StrAt(&s, {"name"});
      auto it = std::ranges::find(out, name, &PodResourceClaim::name);
      if (it != out.end()) it->generated_claim_name = StrAt(&s, {"resourceClaimName"});
    }
  }
  return out;
}

std::vector<PodResourceClaim> PodResourceClaimsOf(const kube::Pod& pod) {
  std::vector<PodResourceClaim> out;
  for (const kube::PodClaim& c : pod.spec.resource_claims) {
    PodResourceClaim& r = out.emplace_back(
        PodResourceClaim{.name = c.name,
                         .resource_claim_name = c.resource_claim_name,
                         .resource_claim_template_name = c.resource_claim_template_name});
    if (auto it = pod.status.resource_claim_statuses.find(c.name);
        it != pod.status.resource_claim_statuses.end()) {
      r.generated_claim_name = it->second;
    }
  }
  return out;
}

Result<std::vector<DraRequest>> ClaimRequests(const kube::GenericObject& claim_or_template,
                                              const std::vector<DeviceProfile>& profiles,
                                              const ObjectsByName& device_classes) {
  const std::string what = fmt::format(
      "{} {}", claim_or_template.kind.empty() ? "ResourceClaim" : claim_or_template.kind,
      Quote(ObjectName(claim_or_template)));
  Result<json::value> spec = ParseJson(claim_or_template.spec_json, what + " spec");
  if (!spec) return tl::unexpected(spec.error());
  // A template holds the claim's spec one level down (spec.spec).
  const json::value* claim_spec =
      claim_or_template.kind == "ResourceClaimTemplate" ? At(&*spec, {"spec"}) : &*spec;
  const json::value* devices = At(claim_spec, {"devices"});
  if (const json::array* c = ArrayAt(devices, {"constraints"}); c != nullptr && !c->empty()) {
    return tl::unexpected(Invalid(what + ": spec.devices.constraints are not supported: Slurm "
                                         "chooses the devices and cannot apply them"));
  }
  std::vector<DraRequest> out;
  const json::array* requests = ArrayAt(devices, {"requests"});
  if (requests == nullptr) return out;
  for (const json::value& r : *requests) {
    const std::string name = StrAt(&r, {"name"});
    const auto bad = [&](std::string_view why) {
      return tl::unexpected(Invalid(fmt::format("{} request {}: {}", what, Quote(name), why)));
    };
    if (At(&r, {"firstAvailable"}) != nullptr && At(&r, {"exactly"}) == nullptr) {
      return bad("firstAvailable is not supported: Slurm allocates one kind of device");
    }
    const json::value* exactly = At(&r, {"exactly"});
    if (exactly == nullptr) return bad("needs `exactly`");
    const std::string cls = StrAt(exactly, {"deviceClassName"});
    if (cls.empty()) return bad("has no deviceClassName");
    const std::string mode = StrAt(exactly, {"allocationMode"});
    if (!mode.empty() && mode != "ExactCount") {
      return bad(fmt::format("allocationMode {} is not supported: Slurm allocates a count", mode));
    }
    if (const json::array* s = ArrayAt(exactly, {"selectors"}); s != nullptr && !s->empty()) {
      return bad("selectors are not supported: Slurm chooses the devices and cannot apply them");
    }
    if (BoolAt(exactly, {"adminAccess"})) return bad("adminAccess is not supported");
    if (At(exactly, {"capacity"}) != nullptr) {
      return bad("capacity requests are not supported: Slurm allocates whole devices");
    }
    std::int64_t count = 1;
    if (const json::value* c = At(exactly, {"count"}); c != nullptr) {
      std::optional<std::int64_t> n = IntOf(c);
      if (!n || *n < 1) return bad("count must be a positive integer");
      count = *n;
    }
    auto cls_it = device_classes.find(cls);
    Result<const DeviceProfile*> profile =
        ProfileForClass(cls, cls_it == device_classes.end() ? nullptr : cls_it->second, profiles);
    if (!profile) return bad(profile.error().message);
    out.push_back(
        {.device_class = cls, .profile = (*profile)->name, .count = count, .claim_request = name});
  }
  return out;
}

namespace {

// Both PodDraRequests and DraAdmissionProblems: every request, and every problem.
std::vector<DraRequest> CollectRequests(const kube::Pod& pod,
                                        const std::vector<DeviceProfile>& profiles,
                                        const ObjectsByName& device_classes,
                                        const std::vector<PodResourceClaim>& claims,
                                        const ObjectsByName& claim_templates,
                                        std::vector<std::string>& problems) {
  // Extended resource -> class: the implicit name, and the classes' extendedResourceName.
  std::map<std::string, std::string> class_of_resource;
  for (const auto& [name, cls] : device_classes) {
    if (cls == nullptr) continue;
    Result<json::value> spec = ParseJson(cls->spec_json, "DeviceClass spec");
    if (!spec) continue;
    if (std::string ext = StrAt(&*spec, {"extendedResourceName"}); !ext.empty()) {
      class_of_resource[ext] = name;
    }
  }
  struct Ask {
    std::string container;
    std::int64_t count = 0;
  };
  std::map<std::string, Ask> asks;  // by resource name
  auto scan = [&](const std::vector<kube::Container>& list) {
    for (const kube::Container& c : list) {
      std::map<std::string, std::string> resources = c.resources.limits;
      for (const auto& [k, v] : c.resources.requests) resources[k] = v;  // requests win
      for (const auto& [resource, quantity] : resources) {
        const bool implicit = resource.starts_with(kDraExtendedResourcePrefix);
        if (!implicit && !class_of_resource.contains(resource)) continue;
        Result<std::int64_t> n = kube::ParseQuantityValue(quantity);
        if (!n) {
          problems.push_back(fmt::format("resource {} of container {}: {} is not a quantity",
                                         Quote(resource), Quote(c.name), Quote(quantity)));
          continue;
        }
        if (*n <= 0) continue;
        auto [it, fresh] = asks.try_emplace(resource, Ask{c.name, *n});
        if (!fresh && it->second.container != c.name) {
          problems.push_back(fmt::format(
              "resource {} is requested by containers {} and {}: the bridge supports one "
              "requesting container per device class",
              Quote(resource), Quote(it->second.container), Quote(c.name)));
        }
      }
    }
  };
  scan(pod.spec.init_containers);
  scan(pod.spec.containers);

  std::vector<DraRequest> out;
  for (const auto& [resource, ask] : asks) {
    const std::string cls = resource.starts_with(kDraExtendedResourcePrefix)
                                ? resource.substr(kDraExtendedResourcePrefix.size())
                                : class_of_resource[resource];
    auto cls_it = device_classes.find(cls);
    Result<const DeviceProfile*> profile =
        ProfileForClass(cls, cls_it == device_classes.end() ? nullptr : cls_it->second, profiles);
    if (!profile) {
      problems.push_back(fmt::format("resource {}: {}: Slurm could not choose its devices",
                                     Quote(resource), profile.error().message));
      continue;
    }
    out.push_back({.device_class = cls,
                   .profile = (*profile)->name,
                   .count = ask.count,
                   .resource_name = resource,
                   .container = ask.container});
  }

  for (const PodResourceClaim& c : claims) {
    if (!c.resource_claim_name.empty()) {
      problems.push_back(fmt::format(
          "pod claim {} names ResourceClaim {}: a claim shared by pods cannot follow one Slurm "
          "job's allocation; use resourceClaimTemplateName",
          Quote(c.name), Quote(c.resource_claim_name)));
      continue;
    }
    if (c.resource_claim_template_name.empty()) {
      problems.push_back(fmt::format("pod claim {} names no claim and no template", Quote(c.name)));
      continue;
    }
    auto it = claim_templates.find(c.resource_claim_template_name);
    if (it == claim_templates.end() || it->second == nullptr) {
      problems.push_back(fmt::format("pod claim {}: ResourceClaimTemplate {} could not be read",
                                     Quote(c.name), Quote(c.resource_claim_template_name)));
      continue;
    }
    Result<std::vector<DraRequest>> requests = ClaimRequests(*it->second, profiles, device_classes);
    if (!requests) {
      problems.push_back(fmt::format("pod claim {}: {}", Quote(c.name), requests.error().message));
      continue;
    }
    for (DraRequest& r : *requests) {
      r.pod_claim = c.name;
      out.push_back(std::move(r));
    }
  }
  return out;
}

}  // namespace

Result<std::vector<DraRequest>> PodDraRequests(const kube::Pod& pod,
                                               const std::vector<DeviceProfile>& profiles,
                                               const ObjectsByName& device_classes,
                                               const std::vector<PodResourceClaim>& claims,
                                               const ObjectsByName& claim_templates) {
  std::vector<std::string> problems;
  std::vector<DraRequest> out =
      CollectRequests(pod, profiles, device_classes, claims, claim_templates, problems);
  if (!problems.empty()) {
    return tl::unexpected(Invalid(fmt::format("pod {}/{}: {}", pod.metadata.namespace_,
                                              pod.metadata.name, fmt::join(problems, "; "))));
  }
  return out;
}

std::vector<std::string> DraAdmissionProblems(const kube::Pod& pod,
                                              const std::vector<DeviceProfile>& profiles,
                                              const ObjectsByName& device_classes,
                                              const std::vector<PodResourceClaim>& claims,
                                              const ObjectsByName& claim_templates) {
  std::vector<std::string> problems;
  std::vector<DraRequest> requests =
      CollectRequests(pod, profiles, device_classes, claims, claim_templates, problems);
  bool core_bitmap = false;
  bool indexed = false;
  std::string core_resource;
  for (const DraRequest& r : requests) {
    const DeviceProfile* p = FindProfile(profiles, r.profile);
    if (p == nullptr) continue;
    if (p->backend == DeviceBackend::kCoreBitmap) {
      core_bitmap = true;
      if (core_resource.empty()) {
        core_resource = r.resource_name.empty() ? fmt::format("pod claim {}", Quote(r.pod_claim))
                                                : Quote(r.resource_name);
      }
    } else {
      indexed = true;
    }
  }
  if (core_bitmap) {
    auto asks_cpu = [](const kube::Container& c) {
      return c.resources.requests.contains("cpu") || c.resources.limits.contains("cpu");
    };
    if (std::ranges::any_of(pod.spec.containers, asks_cpu) ||
        std::ranges::any_of(pod.spec.init_containers, asks_cpu) ||
        pod.spec.resources.requests.contains("cpu") || pod.spec.resources.limits.contains("cpu")) {
      problems.push_back(fmt::format(
          "resource \"cpu\" and {} cannot both be requested: Slurm's cores are the pod's CPUs",
          core_resource));
    }
  }
  const std::map<std::string, std::string> job = JobAnnotations(pod.metadata.annotations);
  if (core_bitmap && job.contains("cpu-per-task")) {
    problems.push_back(fmt::format(
        "annotation {}cpu-per-task cannot be used with {}: the CPUs come from the request",
        kJobAnnotationPrefix, core_resource));
  }
  if (indexed && job.contains("gres")) {
    problems.push_back(fmt::format(
        "annotation {}gres cannot be used with a GPU device class request: the GRES come from "
        "the request",
        kJobAnnotationPrefix));
  }
  return problems;
}

// ---- From Slurm's allocation to devices ----

Result<std::vector<std::int64_t>> ExpandIndexList(std::string_view list) {
  std::vector<std::int64_t> out;
  const auto bad = [&] {
    return tl::unexpected(Invalid(fmt::format("{} is not an index list like 0-1,3", Quote(list))));
  };
  if (list.empty()) return bad();
  for (std::size_t start = 0; start <= list.size();) {
    std::size_t comma = list.find(',', start);
    if (comma == std::string_view::npos) comma = list.size();
    const std::string_view part = list.substr(start, comma - start);
    const std::size_t dash = part.find('-');
    std::optional<std::int64_t> lo;
    std::optional<std::int64_t> hi;
    if (dash == std::string_view::npos) {
      lo = IsDigits(part) ? ToInt(part) : std::nullopt;
      hi = lo;
    } else if (IsDigits(part.substr(0, dash)) && IsDigits(part.substr(dash + 1))) {
      lo = ToInt(part.substr(0, dash));
      hi = ToInt(part.substr(dash + 1));
    }
    if (!lo || !hi || *hi < *lo || *hi - *lo >= 4096) return bad();
    for (std::int64_t i = *lo; i <= *hi; ++i) {
      if (out.size() >= 4096) return bad();
      out.push_back(i);
    }
    start = comma + 1;
  }
  return out;
}

Result<std::vector<std::int64_t>> BitmapBits(std::string_view bitmap) {
  const auto bad = [&] {
    return tl::unexpected(
        Invalid(fmt::format("core bitmap {} is not hex (0x0F) or a list (0-3)", Quote(bitmap))));
  };
  std::vector<std::int64_t> out;
  if (bitmap.starts_with("0x") || bitmap.starts_with("0X")) {
    const std::string_view hex = bitmap.substr(2);
    if (hex.empty() || hex.size() > 65536 / 4) return bad();
    for (std::size_t i = 0; i < hex.size(); ++i) {
      const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(hex[i])));
      int v = 0;
      if (c >= '0' && c <= '9') {
        v = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        v = c - 'a' + 10;
      } else {
        return bad();
      }
      const auto digit = static_cast<std::int64_t>(hex.size() - 1 - i);  // from the right
      for (int b = 0; b < 4; ++b) {
        if ((v & (1 << b)) != 0) out.push_back(digit * 4 + b);
      }
    }
    std::ranges::sort(out);
    return out;
  }
  Result<std::vector<std::int64_t>> list = ExpandIndexList(bitmap);
  if (!list) return bad();
  std::ranges::sort(*list);
  return list;
}

Result<std::vector<DeviceAssignment>> AssignDevices(const std::vector<DraRequest>& requests,
                                                    const NodeInventory& inventory,
                                                    const slurm::NodeAllocation& allocation,
                                                    const std::vector<DeviceProfile>& profiles) {
  std::vector<DeviceAssignment> out;
  const std::string& node = allocation.node;
  // Slurm's indices per (gresName, gresType) and its CPUs, each consumed in order by a cursor.
  std::map<std::pair<std::string, std::string>, std::vector<std::int64_t>> indices;
  std::map<std::pair<std::string, std::string>, std::size_t> index_cursor;
  std::map<std::string, std::vector<const InventoryDevice*>> cpus;  // by profile
  std::map<std::string, std::size_t> cpu_cursor;
  std::set<std::string> used_names;

  for (const DraRequest& r : requests) {
    const DeviceProfile* p = FindProfile(profiles, r.profile);
    if (p == nullptr) {
      return tl::unexpected(Invalid(fmt::format("device class {}: profile {} is not configured",
                                                Quote(r.device_class), Quote(r.profile))));
    }
    DeviceAssignment a{.request = r, .request_name = r.claim_request};
    if (a.request_name.empty()) {
      // One request per class in the pod's own claim: "cpu", or the GRES name; then -2, -3, ...
      const std::string base = p->backend == DeviceBackend::kCoreBitmap ? "cpu" : p->gres_name;
      a.request_name = base;
      for (int n = 2; used_names.contains(a.request_name); ++n) {
        a.request_name = fmt::format("{}-{}", base, n);
      }
      used_names.insert(a.request_name);
    }
    const std::string who =
        fmt::format("device class {} (profile {})", Quote(r.device_class), Quote(p->name));
    if (p->backend == DeviceBackend::kCoreBitmap) {
      auto [it, fresh] = cpus.try_emplace(p->name);
      if (fresh) {
        if (allocation.core_bitmap.empty()) {
          return tl::unexpected(Invalid(fmt::format(
              "{}: Slurm's layout of node {} has no core bitmap, so its CPUs are unknown", who,
              node)));
        }
        Result<std::vector<std::int64_t>> bits = BitmapBits(allocation.core_bitmap);
        if (!bits) {
          return tl::unexpected(Invalid(fmt::format("node {}: {}", node, bits.error().message)));
        }
        const std::int64_t cores = inventory.CoreCount(p->name);
        if (cores == 0) {
          return tl::unexpected(Invalid(fmt::format(
              "{}: node {} publishes no CPU device of the profile in its ResourceSlices", who,
              node)));
        }
        // 0: Slurm did not say; an overflowing product is a mismatch like any other.
        std::int64_t slurm_cores = 0;
        if (__builtin_mul_overflow(allocation.sockets_per_node, allocation.cores_per_socket,
                                   &slurm_cores)) {
          slurm_cores = -1;
        }
        if (slurm_cores != 0 && slurm_cores != cores) {
          return tl::unexpected(Invalid(fmt::format(
              "{}: Slurm counts {} cores on node {} ({} socket(s) x {}), its ResourceSlices {}: "
              "Slurm's core bitmap cannot be mapped to CPUs",
              who, slurm_cores, node, allocation.sockets_per_node, allocation.cores_per_socket,
              cores)));
        }
        const std::vector<InventoryDevice>& devs = inventory.devices.find(p->name)->second;
        for (std::int64_t bit : *bits) {
          const std::size_t before = it->second.size();
          for (const InventoryDevice& d : devs) {
            if (d.core == bit) it->second.push_back(&d);
          }
          if (it->second.size() == before) {
            return tl::unexpected(Invalid(fmt::format(
                "{}: core {} of Slurm's core bitmap {} has no CPU in node {}'s ResourceSlices "
                "({} cores)",
                who, bit, allocation.core_bitmap, node, cores)));
          }
        }
      }
      std::size_t& cursor = cpu_cursor[p->name];
      const std::size_t left = it->second.size() - cursor;
      if (static_cast<std::int64_t>(left) < r.count) {
        return tl::unexpected(Invalid(
            fmt::format("{}: requested {} CPUs, Slurm allocated {} on node {} (core bitmap {})",
                        who, r.count, left, node, allocation.core_bitmap)));
      }
      for (std::int64_t i = 0; i < r.count; ++i) a.devices.push_back(*it->second[cursor++]);
      out.push_back(std::move(a));
      continue;
    }

    const std::pair<std::string, std::string> key{p->gres_name, p->gres_type};
    auto [it, fresh] = indices.try_emplace(key);
    if (fresh) {
      // An untyped profile takes the GRES of its name whose type no typed profile claims.
      std::set<std::string> typed;
      for (const DeviceProfile& other : profiles) {
        if (other.backend == DeviceBackend::kIndexedGres && other.gres_name == p->gres_name &&
            !other.gres_type.empty()) {
          typed.insert(other.gres_type);
        }
      }
      for (const slurm::GresAllocation& g : allocation.gres) {
        if (g.name != p->gres_name) continue;
        if (p->gres_type.empty() ? typed.contains(g.type) : g.type != p->gres_type) continue;
        const std::string gres = g.type.empty() ? g.name : g.name + ":" + g.type;
        if (g.index.empty()) {
          return tl::unexpected(Invalid(fmt::format(
              "{}: Slurm's layout of node {} lists GRES {} (count {}) without device indices "
              "(upstream slurm-bridge #33), so which devices Slurm chose is unknown and no claim "
              "can name them",
              who, node, gres, g.count)));
        }
        Result<std::vector<std::int64_t>> v = ExpandIndexList(g.index);
        if (!v) {
          return tl::unexpected(Invalid(
              fmt::format("{}: GRES {} on node {}: {}", who, gres, node, v.error().message)));
        }
        it->second.insert(it->second.end(), v->begin(), v->end());
      }
    }
    std::size_t& cursor = index_cursor[key];
    const std::size_t left = it->second.size() - cursor;
    if (static_cast<std::int64_t>(left) < r.count) {
      return tl::unexpected(
          Invalid(fmt::format("{}: requested {}, Slurm allocated {} {} on node {}", who, r.count,
                              left, DraTres(*p), node)));
    }
    for (std::int64_t i = 0; i < r.count; ++i) {
      const std::int64_t index = it->second[cursor++];
      const InventoryDevice* d = inventory.ByIndex(p->name, index);
      if (d == nullptr) {
        // Perhaps a device of another profile with the same GRES name: say which.
        std::string owner;
        for (const DeviceProfile& other : profiles) {
          if (&other == p || other.gres_name != p->gres_name) continue;
          if (const InventoryDevice* o = inventory.ByIndex(other.name, index)) {
            owner = fmt::format(" (it is {} of profile {})", DeviceId(*o), Quote(other.name));
          }
        }
        return tl::unexpected(Invalid(fmt::format(
            "{}: Slurm's {} index {} on node {} is no device of the profile in the node's "
            "ResourceSlices{}",
            who, p->gres_name, index, node, owner)));
      }
      a.devices.push_back(*d);
    }
    out.push_back(std::move(a));
  }
  return out;
}

// ---- Claims ----

namespace {

json::object StatusObject(const std::vector<DeviceAssignment>& assignments, const kube::Pod& pod,
                          std::string_view k8s_node) {
  json::array results;
  for (const DeviceAssignment& a : assignments) {
    for (const InventoryDevice& d : a.devices) {
      results.push_back(json::object{{"request", a.request_name},
                                     {"driver", d.driver},
                                     {"pool", d.pool},
                                     {"device", d.device}});
    }
  }
  json::object requirement{{"key", "metadata.name"},
                           {"operator", "In"},
                           {"values", json::array{json::string(k8s_node)}}};
  json::object term{{"matchFields", json::array{requirement}}};
  json::object allocation{{"devices", json::object{{"results", std::move(results)}}},
                          {"nodeSelector", json::object{{"nodeSelectorTerms", json::array{term}}}}};
  json::object consumer{
      {"resource", "pods"}, {"name", pod.metadata.name}, {"uid", pod.metadata.uid}};
  return json::object{{"allocation", std::move(allocation)},
                      {"reservedFor", json::array{consumer}}};
}

// "device.attributes['gpu.example.com'].index in [0, 2]" when every device's index (or CPU id)
// was read from one attribute; "" otherwise (an index from the name has no attribute to select).
std::string PinningSelector(const std::vector<InventoryDevice>& devices) {
  if (devices.empty() || devices.front().index_attribute.empty()) return "";
  const std::string& attribute = devices.front().index_attribute;
  std::vector<std::int64_t> values;
  for (const InventoryDevice& d : devices) {
    if (d.index_attribute != attribute) return "";
    values.push_back(d.cpu_id >= 0 ? d.cpu_id : d.index);
  }
  const std::size_t slash = attribute.rfind('/');
  return fmt::format("device.attributes['{}'].{} in [{}]", attribute.substr(0, slash),
                     attribute.substr(slash + 1), fmt::join(values, ", "));
}

}  // namespace

std::string AllocationStatusJson(const std::vector<DeviceAssignment>& assignments,
                                 const kube::Pod& pod, std::string_view k8s_node) {
  return json::serialize(json::object{{"status", StatusObject(assignments, pod, k8s_node)}});
}

std::string ExtendedResourceClaimName(const kube::Pod& pod) {
  constexpr std::string_view kInfix = "-extended-resources-";
  const std::string uid = pod.metadata.uid.substr(0, 8);
  std::string name = pod.metadata.name.substr(0, 253 - kInfix.size() - uid.size());
  while (!name.empty() && (name.back() == '-' || name.back() == '.')) name.pop_back();
  return name + std::string(kInfix) + uid;
}

std::optional<PlannedClaim> PlanExtendedResourceClaim(
    const kube::Pod& pod, std::string_view k8s_node,
    const std::vector<DeviceAssignment>& assignments) {
  std::vector<DeviceAssignment> mine;
  for (const DeviceAssignment& a : assignments) {
    if (a.request.pod_claim.empty()) mine.push_back(a);
  }
  if (mine.empty()) return std::nullopt;
  PlannedClaim out;
  json::array requests;
  for (const DeviceAssignment& a : mine) {
    json::object exactly{{"deviceClassName", a.request.device_class},
                         {"allocationMode", "ExactCount"},
                         {"count", a.request.count}};
    // Pinned where an attribute names the devices, so that a claim allocated again by someone
    // else would get the same ones.
    if (std::string cel = PinningSelector(a.devices); !cel.empty()) {
      json::object selector{{"cel", json::object{{"expression", cel}}}};
      exactly["selectors"] = json::array{selector};
    }
    requests.push_back(json::object{{"name", a.request_name}, {"exactly", std::move(exactly)}});
    out.mappings.push_back({.container = a.request.container,
                            .resource_name = a.request.resource_name,
                            .request_name = a.request_name});
  }
  json::object status = StatusObject(mine, pod, k8s_node);
  out.status_json = json::serialize(json::object{{"status", status}});
  json::object owner{{"apiVersion", "v1"},      {"kind", "Pod"},      {"name", pod.metadata.name},
                     {"uid", pod.metadata.uid}, {"controller", true}, {"blockOwnerDeletion", true}};
  json::object metadata{
      {"name", ExtendedResourceClaimName(pod)},
      {"namespace", pod.metadata.namespace_},
      {"annotations", json::object{{std::string(kExtendedResourceClaimAnnotation), "true"}}},
      {"ownerReferences", json::array{owner}}};
  json::object devices{{"requests", std::move(requests)}};
  json::object object{{"apiVersion", "resource.k8s.io/v1"},
                      {"kind", "ResourceClaim"},
                      {"metadata", std::move(metadata)},
                      {"spec", json::object{{"devices", std::move(devices)}}},
                      {"status", std::move(status)}};
  out.object_json = json::serialize(object);
  return out;
}

std::string ExtendedResourceClaimStatusPatch(std::string_view claim_name,
                                             const std::vector<RequestMapping>& mappings) {
  json::array list;
  for (const RequestMapping& m : mappings) {
    list.push_back(json::object{{"containerName", m.container},
                                {"resourceName", m.resource_name},
                                {"requestName", m.request_name}});
  }
  json::object ext{{"resourceClaimName", json::string(claim_name)},
                   {"requestMappings", std::move(list)}};
  return json::serialize(
      json::object{{"status", json::object{{"extendedResourceClaimStatus", std::move(ext)}}}});
}

}  // namespace sb::bridge
