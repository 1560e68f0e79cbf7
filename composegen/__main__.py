from composegen.entry import main

main()
