# frozen_string_literal: true

# Run by ruby/test/installed/check.sh with GEM_HOME set to a scratch directory into which only
# the built gem was installed, from a directory outside the repository: `require "kura"` must
# load the installed gem's files and extension, and the README's Ruby example must run.

require "stringio"
require "tmpdir"

repository = File.realpath(ARGV.fetch(0))
readme = ARGV.fetch(1)
require "kura"

loaded = $LOADED_FEATURES.grep(/kura_ext\./)
raise "the extension was not loaded: #{$LOADED_FEATURES.grep(/kura/)}" if loaded.empty?
loaded.each do |path|
  raise "kura loaded from the repository: #{path}" if File.realpath(path).start_with?(repository + "/")
  raise "kura not loaded from GEM_HOME: #{path}" unless File.realpath(path).start_with?(File.realpath(ENV.fetch("GEM_HOME")))
end
spec = Gem.loaded_specs.fetch("kura")
raise "license #{spec.license.inspect}" unless spec.license == "Apache-2.0"

block = File.read(readme)[/```ruby\n(.*?)```/m, 1] or raise "no ruby block in #{readme}"
Dir.mktmpdir do |scratch|
  Dir.chdir(scratch) do
    output = StringIO.new
    $stdout = output
    begin
      eval(block, TOPLEVEL_BINDING.dup, readme) # rubocop:disable Security/Eval
    ensure
      $stdout = STDOUT
    end
    raise "the README example printed #{output.string.inspect}" unless output.string.include?("apple: red")

    Kura.open("words.kut") do |db|
      db.update("a" => "1", "b" => "2", "c" => "3")
      raise "to: must be excluded" unless db.each_key(from: "a", to: "c").to_a == %w[a b]
      raise "inclusive: must include to:" unless db.each_key(from: "a", to: "c", inclusive: true).to_a == %w[a b c]
      raise "reversed walks the same keys down" unless db.each_key(from: "a", to: "c", reversed: true).to_a == %w[b a]
    end
  end
end
puts "smoke: kura #{Kura::VERSION} from #{spec.full_gem_path} on Ruby #{RUBY_VERSION}: ok"
