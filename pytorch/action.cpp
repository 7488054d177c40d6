// Reading and writing single actions of a PyTorch schedule table. The
// grammar is PyTorch's (`_Action.from_str`): digits, a type word, optional
// digits; or `(` actions separated by `;` `)` then a type word. Unlike
// PyTorch, which matches a prefix and drops what follows, text after the
// action is an error: a typo must not silently become another action.
#include "action.hpp"

#include <array>
#include <cctype>
#include <charconv>
#include <limits>

namespace pipevm::pytorch {

namespace {

struct TypeWord {
  std::string_view word;
  ActionType type;
};
// Longest words first, so that a prefix never wins over the whole word.
constexpr std::array<TypeWord, 12> kTypeWords{{
    {"OVERLAP_F_B", ActionType::OVERLAP_F_B},
    {"REDUCE_GRAD", ActionType::REDUCE_GRAD},
    {"UNSHARD", ActionType::UNSHARD},
    {"RESHARD", ActionType::RESHARD},
    {"SEND_F", ActionType::SEND_F},
    {"RECV_F", ActionType::RECV_F},
    {"SEND_B", ActionType::SEND_B},
    {"RECV_B", ActionType::RECV_B},
    {"F", ActionType::F},
    {"I", ActionType::I},
    {"W", ActionType::W},
    {"B", ActionType::B},
}};

bool blank(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

class CellReader {
 public:
  CellReader(std::string_view text, std::uint32_t base, std::optional<ActionError>& error)
      : text_(text), base_(base), error_(error) {}

  std::optional<Action> read_all() {
    skip_blanks();
    if (at_ == text_.size()) return std::nullopt;
    auto action = read_action(true);
    if (!action) return std::nullopt;
    skip_blanks();
    if (at_ != text_.size())
      return fail("unexpected text after the action '" + to_string(*action) + "'");
    return action;
  }

 private:
  std::optional<Action> fail(std::string message) {
    if (!error_) error_ = ActionError{std::move(message), static_cast<std::uint32_t>(at_)};
    return std::nullopt;
  }
  void skip_blanks() {
    while (at_ < text_.size() && blank(text_[at_])) ++at_;
  }
  std::optional<int> read_number() {
    const std::size_t begin = at_;
    while (at_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[at_])) != 0) ++at_;
    if (at_ == begin) return std::nullopt;
    int value = 0;
    const auto [end, ec] = std::from_chars(text_.data() + begin, text_.data() + at_, value);
    if (ec != std::errc{} || end != text_.data() + at_) {
      at_ = begin;
      return std::nullopt;
    }
    return value;
  }
  std::optional<ActionType> read_type() {
    for (const TypeWord& w : kTypeWords) {
      if (text_.substr(at_, w.word.size()) == w.word) {
        at_ += w.word.size();
        return w.type;
      }
    }
    return std::nullopt;
  }

  std::optional<Action> read_action(bool allow_group) {
    Action action;
    const std::size_t begin = at_;
    if (at_ < text_.size() && text_[at_] == '(') {
      if (!allow_group) return fail("an overlapped pair cannot hold another one");
      ++at_;
      for (;;) {
        skip_blanks();
        auto sub = read_action(false);
        if (!sub) return std::nullopt;
        action.sub_actions.push_back(std::move(*sub));
        skip_blanks();
        if (at_ < text_.size() && text_[at_] == ';') {
          ++at_;
          continue;
        }
        if (at_ < text_.size() && text_[at_] == ')') break;
        return fail("expected ';' or ')' in an overlapped pair");
      }
      ++at_;
      const std::size_t type_at = at_;
      const auto type = read_type();
      if (type != ActionType::OVERLAP_F_B) {
        at_ = type_at;
        return fail("expected OVERLAP_F_B after the ')' of an overlapped pair");
      }
      action.type = *type;
    } else {
      const auto stage = read_number();
      if (!stage) return fail("expected an action: STAGE TYPE [MICROBATCH], e.g. 2F0");
      const std::size_t type_at = at_;
      const auto type = read_type();
      if (!type || *type == ActionType::OVERLAP_F_B) {
        at_ = type_at;
        return fail(
            "expected an action type (F, I, W, B, SEND_F, RECV_F, SEND_B, RECV_B, "
            "UNSHARD, RESHARD, REDUCE_GRAD) after the stage");
      }
      action.stage = *stage;
      action.type = *type;
      const std::size_t mb_at = at_;
      if (const auto mb = read_number()) {
        action.micro_batch = *mb;
      } else if (at_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[at_])) != 0) {
        at_ = mb_at;
        return fail("micro-batch number too large");
      }
      const bool needs_mb = action.type != ActionType::UNSHARD &&
                            action.type != ActionType::RESHARD &&
                            action.type != ActionType::REDUCE_GRAD;
      if (needs_mb && action.micro_batch < 0) {
        return fail(std::string(name(action.type)) + " needs a micro-batch number, e.g. " +
                    std::to_string(action.stage) + std::string(name(action.type)) + "0");
      }
    }
    action.range = {base_ + static_cast<std::uint32_t>(begin),
                    base_ + static_cast<std::uint32_t>(at_)};
    return action;
  }

  std::string_view text_;
  std::uint32_t base_;
  std::optional<ActionError>& error_;
  std::size_t at_ = 0;
};

}  // namespace

std::string_view name(ActionType type) {
  for (const TypeWord& w : kTypeWords) {
    if (w.type == type) return w.word;
  }
  return "?";
}

bool is_compute(ActionType type) {
  switch (type) {
    case ActionType::F:
    case ActionType::I:
    case ActionType::W:
    case ActionType::B:
    case ActionType::OVERLAP_F_B:
      return true;
    case ActionType::SEND_F:
    case ActionType::RECV_F:
    case ActionType::SEND_B:
    case ActionType::RECV_B:
    case ActionType::UNSHARD:
    case ActionType::RESHARD:
    case ActionType::REDUCE_GRAD:
      return false;
  }
  return false;
}

bool is_comm(ActionType type) {
  return type == ActionType::SEND_F || type == ActionType::RECV_F || type == ActionType::SEND_B ||
         type == ActionType::RECV_B;
}

bool Action::same(const Action& other) const {
  if (type != other.type || stage != other.stage || micro_batch != other.micro_batch ||
      sub_actions.size() != other.sub_actions.size()) {
    return false;
  }
  for (std::size_t i = 0; i < sub_actions.size(); ++i) {
    if (!sub_actions[i].same(other.sub_actions[i])) return false;
  }
  return true;
}

std::string to_string(const Action& action) {
  std::string text;
  if (action.type == ActionType::OVERLAP_F_B) {
    text += '(';
    for (std::size_t i = 0; i < action.sub_actions.size(); ++i) {
      if (i > 0) text += ';';
      text += to_string(action.sub_actions[i]);
    }
    text += ')';
    text += name(action.type);
    return text;
  }
  text += std::to_string(action.stage);
  text += name(action.type);
  if (action.micro_batch >= 0) text += std::to_string(action.micro_batch);
  return text;
}

std::optional<Action> parse_action(std::string_view cell, std::uint32_t base,
                                   std::optional<ActionError>& error) {
  return CellReader(cell, base, error).read_all();
}

}  // namespace pipevm::pytorch
