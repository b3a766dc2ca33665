// Bundled descriptors and users' config.json files.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "base/error.hpp"
#include "models/model_desc.hpp"
#include "models/model_math.hpp"

using namespace twin;

namespace {

// A file in a fresh temp folder, removed with it.
struct TempFile {
  std::filesystem::path dir, path;
  TempFile(const std::string& file_name, const std::string& text) {
    dir = std::filesystem::temp_directory_path() /
          ("twin_models_test_" + std::to_string(::getpid()) + "_" + file_name);
    std::filesystem::create_directories(dir);
    path = dir / file_name;
    std::ofstream(path) << text;
  }
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

// A real-looking HF config (Llama-3.1-8B) with keys we do not use.
const char* kHfConfig = R"({
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 128000,
  "eos_token_id": [128001, 128008, 128009],
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 14336,
  "max_position_embeddings": 131072,
  "mlp_bias": false,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 8,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.43.0.dev0",
  "use_cache": true,
  "vocab_size": 128256
})";

}  // namespace

TEST_CASE("every bundled model loads and is named after its file") {
  const auto names = model_names();
  CHECK(names.size() == 26);
  for (const auto& name : names) {
    INFO(name);
    auto m = resolve_model(name);
    CHECK(m.name == name);
    CHECK(m.head_dim > 0);
    CHECK(m.num_attention_heads % m.num_key_value_heads == 0);
    CHECK_NOTHROW(check_layout(m, {1, 1}));
  }
  CHECK(std::is_sorted(names.begin(), names.end()));
}

TEST_CASE("a bundled model is found by its Hugging Face id, as vLLM names it") {
  CHECK(resolve_model("meta-llama/Llama-3.1-8B").name == "llama-3.1-8b");
  CHECK(resolve_model("meta-llama/llama-3.1-8b").name == "llama-3.1-8b");  // case aside, as the Hub
  CHECK(resolve_model("meta-llama/Llama-3.1-8B-Instruct").name == "llama-3.1-8b");  // same architecture
  CHECK(resolve_model("Qwen/Qwen3-32B").name == "qwen3-32b");
  CHECK(resolve_model("Qwen/Qwen3-30B-A3B").name == "qwen3-30b-a3b");
  // Another checkpoint named beyond a bundled id (a new context, another
  // format) is refused, naming the nearest bundled model.
  CHECK_THROWS_WITH(resolve_model("Qwen/Qwen3-30B-A3B-Instruct-2507"),
                    Catch::Contains("qwen3-30b-a3b") && Catch::Contains("config.json"));
  CHECK_THROWS_WITH(resolve_model("Qwen/Qwen3-32B-FP8"), Catch::Contains("qwen3-32b"));
  CHECK_THROWS_WITH(resolve_model("nobody/Unknown-1B"), Catch::Contains("known models: "));
}

TEST_CASE("a user's config.json loads from a path, named after its stem") {
  TempFile f("my-llama.json", kHfConfig);
  auto m = resolve_model(f.path.string());
  CHECK(m.name == "my-llama");
  CHECK(m.num_key_value_heads == 8);
  CHECK(m.head_dim == 128);
  CHECK(m.torch_dtype == Dtype::bf16);
  CHECK(param_count(m) == param_count(resolve_model("llama-3.1-8b")));
}

TEST_CASE("a Hugging Face model folder loads its config.json, named after the folder") {
  TempFile f("config.json", kHfConfig);
  auto m = resolve_model(f.dir.string());
  CHECK(m.name == f.dir.filename().string());
  CHECK(m.num_hidden_layers == 32);
  // The same file by its path: still the folder's name, not "config".
  CHECK(resolve_model(f.path.string()).name == f.dir.filename().string());
}

TEST_CASE("optional keys take the Hugging Face defaults") {
  TempFile f("config.json", R"({"name": "mini", "hidden_size": 128, "intermediate_size": 256,
      "num_hidden_layers": 2, "num_attention_heads": 8, "vocab_size": 1000,
      "max_position_embeddings": 512})");
  auto m = load_model_file(f.path.string());
  CHECK(m.name == "mini");
  CHECK(m.model_type == "llama");
  CHECK(m.num_key_value_heads == 8);
  CHECK(m.head_dim == 16);
  CHECK_FALSE(m.tie_word_embeddings);
  CHECK_FALSE(m.is_moe());
}

TEST_CASE("bad config files are rejected naming the file and the key") {
  auto rejects = [](const std::string& text, const std::string& key) {
    TempFile f("bad.json", text);
    INFO(text);
    try {
      load_model_file(f.path.string());
      FAIL("accepted a bad file");
    } catch (const UsageError&) {
      FAIL("a bad file is a runtime error, not a usage error");
    } catch (const Error& e) {
      const std::string msg = e.what();
      INFO(msg);
      CHECK(msg.find(f.path.string()) != std::string::npos);
      CHECK(msg.find(key) != std::string::npos);
    }
  };
  const std::string base = R"("hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
      "num_attention_heads": 8, "max_position_embeddings": 512)";
  rejects("{" + base + "}", "vocab_size");                                   // missing
  rejects("{" + base + R"(, "vocab_size": -5})", "vocab_size");               // negative
  rejects("{" + base + R"(, "vocab_size": "many"})", "vocab_size");           // wrong type
  rejects("{" + base + R"(, "vocab_size": 100.5})", "vocab_size");            // not an integer
  rejects("{" + base + R"(, "vocab_size": 100, "num_key_value_heads": 3})", "num_key_value_heads");
  rejects("{" + base + R"(, "vocab_size": 100, "torch_dtype": "float64"})", "torch_dtype");
  rejects("{" + base + R"(, "vocab_size": 100, "model_type": "gpt2"})", "model_type");
  rejects("{" + base + R"(, "vocab_size": 100, "num_local_experts": 8})", "num_experts_per_tok");
  rejects("{" + base + R"(, "vocab_size": 100, "tie_word_embeddings": 1})", "tie_word_embeddings");
  rejects(R"({"hidden_size": 128,)", "JSON");
  // A layer count past 32-bit op repeats (UBSan, twin_fuzz model, seed 21).
  rejects(R"({"hidden_size": 1, "intermediate_size": 1, "num_hidden_layers": 4294967296,
      "num_attention_heads": 1, "max_position_embeddings": 512, "vocab_size": 2})", "num_hidden_layers");
  // A context of 1 token is refused here, naming the model's key (not the
  // scheduler's max_model_len, which the user never set).
  rejects(R"({"hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
      "num_attention_heads": 8, "max_position_embeddings": 1, "vocab_size": 100})", "key 'max_position_embeddings'");
  // Sizes past any real model would overflow the int64 parameter and byte counts.
  rejects(R"({"hidden_size": 768, "intermediate_size": 9000000000000000000, "num_hidden_layers": 2,
      "num_attention_heads": 12, "max_position_embeddings": 512, "vocab_size": 100})", "intermediate_size");
  rejects(R"({"hidden_size": 768, "intermediate_size": 2048, "num_hidden_layers": 100000000000,
      "num_attention_heads": 12, "max_position_embeddings": 512, "vocab_size": 100})", "num_hidden_layers");
  // The experts' own size counts too (UBSan, make fuzz-asan, model, seed 1:
  // 3 x hidden x moe_intermediate_size overflowed layer_params).
  rejects(R"({"hidden_size": 7168, "intermediate_size": 2048, "num_hidden_layers": 2,
      "num_attention_heads": 8, "max_position_embeddings": 512, "vocab_size": 100, "num_local_experts": 8,
      "num_experts_per_tok": 2, "moe_intermediate_size": 1000000000000000000})", "moe_intermediate_size");
}

TEST_CASE("rope_scaling is read: llama3, linear, none, and bad values name the key") {
  CHECK(resolve_model("llama-3.1-8b").rope_scaling.type == "llama3");
  TempFile hf("config.json", kHfConfig);
  const ModelDesc m = resolve_model(hf.path.string());
  CHECK(m.rope_scaling.type == "llama3");
  CHECK(m.rope_scaling.factor == 8.0);
  CHECK(m.rope_scaling.low_freq_factor == 1.0);
  CHECK(m.rope_scaling.high_freq_factor == 4.0);
  CHECK(m.rope_scaling.original_max_position_embeddings == 8192);
  CHECK(resolve_model("llama-2-7b").rope_scaling.type.empty());

  const std::string base = R"({"hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
      "num_attention_heads": 8, "max_position_embeddings": 512, "vocab_size": 100, "rope_scaling": )";
  auto load = [&](const std::string& scaling) {
    TempFile f("rope.json", base + scaling + "}");
    return load_model_file(f.path.string()).rope_scaling;
  };
  CHECK(load("null").type.empty());
  CHECK(load(R"({"rope_type": "default"})").type.empty());
  const RopeScalingDesc linear = load(R"({"type": "linear", "factor": 2.0})");  // older configs say "type"
  CHECK(linear.type == "linear");
  CHECK(linear.factor == 2.0);
  CHECK(load(R"({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768})").type == "yarn");

  auto rejects = [&](const std::string& scaling, const std::string& key) {
    TempFile f("rope.json", base + scaling + "}");
    INFO(scaling);
    try {
      load_model_file(f.path.string());
      FAIL("accepted a bad rope_scaling");
    } catch (const Error& e) {
      const std::string msg = e.what();
      INFO(msg);
      CHECK(msg.find(key) != std::string::npos);
      CHECK(msg.find(f.path.string()) != std::string::npos);
    }
  };
  rejects(R"("llama3")", "rope_scaling");
  rejects(R"({"factor": 8})", "rope_scaling.rope_type");
  rejects(R"({"rope_type": "linear"})", "rope_scaling.factor");
  rejects(R"({"rope_type": "linear", "factor": -2})", "rope_scaling.factor");
  rejects(R"({"rope_type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4})",
          "rope_scaling.original_max_position_embeddings");
  rejects(R"({"rope_type": "llama3", "factor": 8, "low_freq_factor": 4, "high_freq_factor": 1,
              "original_max_position_embeddings": 8192})", "rope_scaling.high_freq_factor");
}

TEST_CASE("sliding_window: Mistral-style windows are read, Qwen2's per-layer windows refused") {
  const std::string base = R"({"hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
      "num_attention_heads": 8, "max_position_embeddings": 512, "vocab_size": 100)";
  auto load = [&](const std::string& extra) {
    TempFile f("window.json", base + extra + "}");
    return load_model_file(f.path.string());
  };
  CHECK(load(R"(, "model_type": "mistral", "sliding_window": 4096)").sliding_window == 4096);
  CHECK(load(R"(, "model_type": "mistral", "sliding_window": null)").sliding_window == 0);
  CHECK(load("").sliding_window == 0);
  // Qwen2 configs carry a window they do not use unless use_sliding_window.
  CHECK(load(R"(, "model_type": "qwen2", "sliding_window": 4096, "use_sliding_window": false)").sliding_window == 0);
  for (const std::string bad : {R"(, "model_type": "qwen2", "use_sliding_window": true, "sliding_window": 4096)",
                                R"(, "model_type": "mistral", "sliding_window": 0)"}) {
    INFO(bad);
    try {
      load(bad);
      FAIL("accepted");
    } catch (const Error& e) {
      const std::string msg = e.what();
      CHECK((msg.find("use_sliding_window") != std::string::npos || msg.find("sliding_window") != std::string::npos));
    }
  }
}

TEST_CASE("an unknown name is a usage error listing the known names") {
  CHECK_THROWS_AS(resolve_model("llama-9"), UsageError);
  CHECK_THROWS_WITH(resolve_model("llama-9"), Catch::Contains("llama-2-7b") && Catch::Contains("tiny"));
}

TEST_CASE("dtype names parse both ways") {
  for (Dtype d : kAllDtypes) CHECK(parse_dtype(dtype_name(d)) == d);
  CHECK(parse_dtype("bfloat16") == Dtype::bf16);
  CHECK_THROWS_WITH(parse_dtype("fp4"), Catch::Contains("int8"));
  CHECK_THROWS_AS(parse_dtype("fp4"), UsageError);
}

TEST_CASE("one dtype vocabulary takes vLLM's and PyTorch's spellings, and auto apart") {
  for (const char* s : {"fp32", "f32", "float32", "float"}) CHECK(parse_dtype(s) == Dtype::fp32);
  for (const char* s : {"fp16", "f16", "float16", "half"}) CHECK(parse_dtype(s) == Dtype::fp16);
  for (const char* s : {"fp8", "fp8_e4m3", "fp8_e5m2"}) CHECK(parse_dtype(s) == Dtype::fp8);
  CHECK_FALSE(parse_dtype_or_auto("auto").has_value());
  CHECK(parse_dtype_or_auto("half") == Dtype::fp16);
  CHECK_THROWS_AS(parse_dtype("auto"), UsageError);  // auto means nothing without a model
  // A long bad value is quoted short.
  const std::string junk(5000, 'x');
  try {
    parse_dtype(junk);
    FAIL("accepted");
  } catch (const UsageError& e) {
    CHECK(std::string(e.what()).size() < 400);
  }
}
