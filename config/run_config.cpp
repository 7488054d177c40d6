// Reading `pipevm run`'s YAML configuration with yaml-cpp: every error names
// the file, line and column (yaml-cpp counts from 0; we print from 1).
#include "run_config.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string_view>

#include "rank_layout.hpp"
#include "read_file.hpp"

namespace pipevm::config {

namespace {

[[noreturn]] void fail_at(const std::string& name, const YAML::Mark& mark,
                          const std::string& message) {
  std::string where = name;
  if (!mark.is_null()) {
    where += ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
  }
  throw ConfigError(where + ": " + message);
}

// A mapping's key as text: YAML also allows a sequence or a mapping as a
// key (`? [a, b]`), which is no name of ours.
std::string key_of(const YAML::Node& key, const std::string& file) {
  if (!key.IsScalar()) fail_at(file, key.Mark(), "a key must be a plain name");
  return key.Scalar();
}

// One section's keys: each known key is read once; any other is an error.
class Section {
 public:
  Section(const YAML::Node& node, std::string section, const std::string& file)
      : node_(node), section_(std::move(section)), file_(file) {
    if (!node_.IsMap()) fail_at(file_, node_.Mark(), "'" + section_ + "' must be a mapping");
  }

  template <typename T>
  void read(const char* key, T& value) {
    known_.emplace_back(key);
    const YAML::Node item = node_[key];
    if (!item) return;
    try {
      value = item.as<T>();
    } catch (const YAML::Exception&) {
      fail_at(file_, item.Mark(), "'" + section_ + "." + key + "' has the wrong type");
    }
  }

  YAML::Mark mark_of(const char* key) const { return node_[key].Mark(); }

  void reject_unknown() const {
    for (const auto& entry : node_) {
      const std::string key = key_of(entry.first, file_);
      if (std::find(known_.begin(), known_.end(), key) == known_.end()) {
        std::string expected;
        for (const std::string& k : known_) expected += (expected.empty() ? "" : ", ") + k;
        fail_at(file_, entry.first.Mark(),
                "unknown key '" + section_ + "." + key + "' (expected one of: " + expected + ")");
      }
    }
  }

 private:
  YAML::Node node_;
  std::string section_;
  const std::string& file_;
  std::vector<std::string> known_;
};

}  // namespace

void set_model_kind(const std::string& kind, ModelConfig& model) {
  const std::optional<ModelKind> parsed = model_kind_from_name(kind);
  if (!parsed) throw ConfigError("unknown model kind '" + kind + "' (expected mlp or vit)");
  if (*parsed == ModelKind::mlp) {
    if (model.kind == ModelKind::vit) model.sizes = default_layer_widths();
    model.kind = ModelKind::mlp;
    return;
  }
  try {
    use_vit(model, model.vit);
  } catch (const std::invalid_argument& error) {
    throw ConfigError(std::string("the ViT's sizes: ") + error.what());
  }
}

std::vector<int> parse_widths(const std::string& text) {
  std::vector<int> widths;
  std::size_t begin = 0;
  while (true) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    const std::string_view part(text.data() + begin, end - begin);
    int width = 0;
    const auto [next, error] = std::from_chars(part.data(), part.data() + part.size(), width);
    if (part.empty() || error != std::errc{} || next != part.data() + part.size() || width <= 0) {
      throw ConfigError("--model '" + text + "': '" + std::string(part) +
                        "' is not a positive width (expected vit, mlp, or widths separated by "
                        "commas, input first, e.g. 784,256,10)");
    }
    widths.push_back(width);
    if (end == text.size()) break;
    begin = end + 1;
  }
  return widths;
}

Loss parse_loss(const std::string& text) {
  std::string normalized = text;
  std::replace(normalized.begin(), normalized.end(), '-', '_');
  const std::optional<Loss> loss = loss_from_name(normalized);
  if (!loss) {
    throw ConfigError("unknown loss '" + text + "' (expected cross-entropy or softmax-mse)");
  }
  return *loss;
}

void apply_yaml_text(const std::string& text, const std::string& name, RunConfig& config) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& error) {
    fail_at(name, error.mark, error.msg);
  }
  if (root.IsNull()) return;  // an empty file changes nothing
  if (!root.IsMap()) fail_at(name, root.Mark(), "the configuration must be a mapping of sections");

  for (const auto& entry : root) {
    const std::string section = key_of(entry.first, name);
    const YAML::Node& node = entry.second;
    if (section == "model") {
      Section s(node, section, name);
      std::string loss = std::string(pipevm::name(config.model.loss));
      std::string kind = std::string(pipevm::name(config.model.kind));
      VitShape& vit = config.model.vit;
      s.read("kind", kind);
      s.read("sizes", config.model.sizes);
      s.read("image_side", vit.image_side);
      s.read("patch", vit.patch);
      s.read("width", vit.width);
      s.read("blocks", vit.blocks);
      s.read("heads", vit.heads);
      s.read("hidden", vit.hidden);
      s.read("loss", loss);
      s.read("seed", config.model.seed);
      s.read("element_bytes", config.element_bytes);
      s.read("bias", config.bias);
      s.reject_unknown();
      try {
        config.model.loss = parse_loss(loss);
      } catch (const ConfigError& error) {
        fail_at(name, s.mark_of("loss"), error.what());
      }
      try {
        set_model_kind(kind, config.model);
      } catch (const ConfigError& error) {
        fail_at(name, s.mark_of("kind"), error.what());
      }
    } else if (section == "data") {
      Section s(node, section, name);
      s.read("source", config.data);
      s.read("synthetic_train", config.synthetic_train);
      s.read("synthetic_test", config.synthetic_test);
      s.reject_unknown();
    } else if (section == "training") {
      Section s(node, section, name);
      s.read("epochs", config.epochs);
      s.read("batch_size", config.batch_size);
      s.read("micro_batches", config.micro_batches);
      s.read("optimizer", config.optimizer.kind);
      s.read("lr", config.optimizer.lr);
      s.read("momentum", config.optimizer.momentum);
      s.read("seed", config.seed);
      s.reject_unknown();
    } else if (section == "parallel") {
      Section s(node, section, name);
      s.read("dp", config.dp);
      s.read("chunks", config.chunks);
      s.read("layout", config.layout);
      s.read("timeout", config.timeout);
      s.reject_unknown();
    } else if (section == "checkpoint") {
      Section s(node, section, name);
      s.read("directory", config.checkpoint);
      s.read("every_steps", config.checkpoint_every);
      s.reject_unknown();
    } else if (section == "costs") {
      if (!node.IsMap()) fail_at(name, node.Mark(), "'costs' must be a mapping");
      for (const auto& cost : node) {
        CostSetting setting;
        setting.key = key_of(cost.first, name);
        setting.where = name + ":" + std::to_string(cost.second.Mark().line + 1) + ":" +
                        std::to_string(cost.second.Mark().column + 1);
        try {
          setting.value = cost.second.as<double>();
        } catch (const YAML::Exception&) {
          fail_at(name, cost.second.Mark(), "'costs." + setting.key + "' must be a number");
        }
        config.costs.push_back(std::move(setting));
      }
    } else {
      fail_at(name, entry.first.Mark(),
              "unknown section '" + section +
                  "' (expected model, data, training, parallel, checkpoint or costs)");
    }
  }
}

void apply_yaml_file(const std::string& path, RunConfig& config) {
  std::string text;
  std::string error;
  if (!read_input_file(path, kMaxYamlBytes, "configuration files", text, error)) {
    throw ConfigError(path + ": cannot read the configuration file: " + error);
  }
  apply_yaml_text(text, path, config);
}

void validate(const RunConfig& config, ConfigUse use) {
  const auto positive = [](int value, const char* what) {
    if (value <= 0)
      throw ConfigError(std::string(what) + " must be positive, not " + std::to_string(value));
  };
  positive(config.epochs, "epochs");
  positive(config.batch_size, "the batch size");
  positive(config.micro_batches, "micro-batches");
  positive(config.element_bytes, "model.element_bytes");
  positive(config.dp, "dp");
  positive(config.chunks, "chunks");
  if (config.model.sizes.size() < 2) {
    throw ConfigError("model.sizes needs at least an input and an output width");
  }
  for (const int size : config.model.sizes) positive(size, "every model width");
  if (use == ConfigUse::run && config.model.sizes.back() > 256) {
    throw ConfigError("the output width (classes) must be at most 256: labels are bytes");
  }
  if (use == ConfigUse::run && !config.bias) {
    throw ConfigError(
        "model.bias: false is for the memory figures of check and simulate; pipevm run trains "
        "layers with biases");
  }
  if (!(config.optimizer.lr > 0.0F) || !std::isfinite(config.optimizer.lr)) {
    throw ConfigError("the learning rate must be a finite positive number");
  }
  if (!(config.optimizer.momentum >= 0.0F && config.optimizer.momentum < 1.0F)) {
    throw ConfigError("training.momentum must lie in [0, 1)");
  }
  if (config.optimizer.kind != "adam" && config.optimizer.kind != "sgd") {
    throw ConfigError("unknown optimizer '" + config.optimizer.kind + "' (expected adam or sgd)");
  }
  if (!rank_layout_from_name(config.layout)) {
    throw ConfigError("unknown layout '" + config.layout +
                      "' (expected mpi, pp-inner or dp-inner)");
  }
  if (!(config.timeout >= 0.0) || !std::isfinite(config.timeout)) {
    throw ConfigError("the timeout must be 0 (wait for ever) or a positive number of seconds");
  }
  if (config.checkpoint_every < 0) {
    throw ConfigError("checkpoint.every_steps must be 0 (every epoch) or positive, not " +
                      std::to_string(config.checkpoint_every));
  }
  if (config.data == "synthetic") {
    positive(config.synthetic_train, "data.synthetic_train");
    positive(config.synthetic_test, "data.synthetic_test");
  }
}

RunConfig read_run_config(const std::string& path, ConfigUse use) {
  RunConfig config;
  if (!path.empty()) apply_yaml_file(path, config);
  validate(config, use);
  return config;
}

RunConfig read_run_config_text(const std::string& text, const std::string& name, ConfigUse use) {
  RunConfig config;
  apply_yaml_text(text, name, config);
  validate(config, use);
  return config;
}

}  // namespace pipevm::config
