// SPDX-License-Identifier: Apache-2.0
#include "bridge/dra/selector.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "bridge/dra/internal.h"

namespace sb::bridge {
namespace {

using dra_internal::Invalid;
using dra_internal::IsIdentifier;
using dra_internal::Quote;
using dra_internal::ToInt;

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

}  // namespace

Result<std::vector<SelectorTerm>> ParseDeviceSelector(std::string_view cel) {
  return SelectorParser(cel).Parse();
}

bool ProfileMatches(const DeviceProfile& profile, std::string_view driver,
                    const SliceDevice& device) {
  if (driver != profile.driver) return false;
  Result<std::vector<SelectorTerm>> terms = ParseDeviceSelector(profile.selector);
  if (!terms) return false;
  return std::ranges::all_of(*terms,
                             [&](const SelectorTerm& t) { return TermMatches(t, driver, device); });
}

}  // namespace sb::bridge
