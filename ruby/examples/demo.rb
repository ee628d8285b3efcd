# frozen_string_literal: true

# `make demo`'s few lines of Ruby: Kura as a persistent Hash (run with ruby -Iruby/lib).

require "kura"
require "tmpdir"

Dir.mktmpdir("kura-demo") do |dir|
  path = File.join(dir, "fruits.kut") # .kut: the ordered B+ tree engine
  Kura.open(path) do |db|
    db["banana"] = "yellow"
    db["apple"] = "red"
    db[:cherry] = "dark red" # Symbols work as keys
    db.batch { |b| b.put("date", "brown"); b.put("elderberry", "purple") } # atomic
    puts "#{db.size} fruits: #{db.keys.join(', ')}"
    puts "from date down to banana: #{db.each(from: "banana", to: "date", inclusive: true, reversed: true).map { |k, v| "#{k}=#{v}" }.join(' ')}"
    puts "apple is #{db['apple']} (#{db['apple'].encoding}), fig is #{db['fig'].inspect}"
    puts "fetch fig: #{begin; db.fetch('fig'); rescue KeyError => e; e.message; end}"
    puts "values_at apple, fig, cherry (one batched lookup): #{db.values_at('apple', 'fig', 'cherry').inspect}"
  end
  Kura.open(path, "r", encoding: "UTF-8") do |db|
    puts "reopened read-only: #{db.to_h.inspect}"
    puts "stats: #{db.stats.slice(:class, :count, :file_size)}"
    db["fig"] = "green"
  rescue Kura::InfeasibleError => e
    puts "writing to a read-only database: #{e.class}: #{e.message}"
  end
end
