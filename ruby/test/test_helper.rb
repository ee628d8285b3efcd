# frozen_string_literal: true

# Shared by the minitest files: loads lib/kura, and lists the databases every behaviour is
# checked on, from the engine registry (Kura.engines), never from a list of our own: each
# engine plainly, and once more with zstd records where the engine compresses records (that
# is also the path where record calls release the GVL).

require "minitest/autorun"
require "tmpdir"
require "fileutils"
require "kura"

module KuraTest
  # Records the sized parameters are computed for: more than any test stores.
  CAPACITY = 10_000

  # [label, engine Hash, open options] for each configuration, and a shard set of trees:
  # ordered, as the registry's shard entry says (order "as shards": ordered when its shards are).
  def self.configurations(only_ordered: false)
    configurations = Kura.engines.flat_map do |engine|
      options = Kura.sized_params(engine[:name], CAPACITY)
      plain = [engine[:name], engine, options]
      if engine[:params].include?("record_comp")
        [plain, ["#{engine[:name]}-zstd", engine, options.merge(record_comp: "zstd")]]
      else
        [plain]
      end
    end
    shard = Kura.engines.find { |engine| engine[:name] == "shard" }
    tree_shards = Kura.sized_params("shard", CAPACITY).merge(inner_engine: "tree", num_shards: 3)
    configurations << ["shard-tree", shard.merge(ordered: true), tree_shards]
    configurations.select { |_, engine, _| !only_ordered || engine[:ordered] }
  end

  # assert_equal that also accepts nil (minitest wants assert_nil for an expected nil).
  module Assertions
    def assert_result(expected, actual, message = nil)
      expected.nil? ? assert_nil(actual, message) : assert_equal(expected, actual, message)
    end
  end

  # A fresh directory per test, removed after it.
  module TempDir
    def setup
      super
      @dir = Dir.mktmpdir("kura-ruby-test")
    end

    def teardown
      FileUtils.rm_rf(@dir)
      super
    end

    def db_path(engine, name = "db")
      File.join(@dir, "#{name}.#{engine[:extension]}")
    end
  end

  # Defines one test method per configuration: `for_each_configuration("name") { |engine,
  # options| ... }` becomes test_name_hash, test_name_tree_zstd, ...
  module PerEngine
    def for_each_configuration(name, only_ordered: false, &body)
      KuraTest.configurations(only_ordered: only_ordered).each do |label, engine, options|
        define_method("test_#{name}_#{label.tr('-', '_')}") { instance_exec(engine, options, &body) }
      end
    end
  end
end
